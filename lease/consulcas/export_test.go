package consulcas

import (
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/lease/caslease"
)

// NewStore returns the records' store on client.
func NewStore(client *api.Client) caslease.Store { return newStore(client) }
