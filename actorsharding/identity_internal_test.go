package actorsharding

import (
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/wire"
)

type userExtractor struct{ HashCodeMessageExtractor }

type namedExtractor struct {
	HashCodeMessageExtractor
	name   string
	shards int
}

func (e namedExtractor) ExtractorIdentity() (string, int) { return e.name, e.shards }

// The identity a region registers with: the coordinator refuses a region
// whose identity differs from the registered regions'.
func TestIdentityOf(t *testing.T) {
	cases := []struct {
		name    string
		ex      MessageExtractor
		want    coordinator.ExtractorIdentity
		wantErr string
	}{
		{"hash-code", NewHashCodeMessageExtractor(100), coordinator.ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}, ""},
		{"hash-code, pointer", &HashCodeMessageExtractor{NumberOfShards: 7}, coordinator.ExtractorIdentity{Name: "hash-code", NumberOfShards: 7}, ""},
		{"hash-code with no number: the default it maps to", HashCodeMessageExtractor{}, coordinator.ExtractorIdentity{Name: "hash-code", NumberOfShards: defaultNumberOfShards}, ""},
		{"a user type that embeds hash-code is its own", userExtractor{NewHashCodeMessageExtractor(100)},
			coordinator.ExtractorIdentity{Name: "actorsharding.userExtractor"}, ""},
		{"a user type that names itself", namedExtractor{name: "orders-v2", shards: 64},
			coordinator.ExtractorIdentity{Name: "orders-v2", NumberOfShards: 64}, ""},
		{"a user type that gives only its number of shards", namedExtractor{shards: 64},
			coordinator.ExtractorIdentity{Name: "actorsharding.namedExtractor", NumberOfShards: 64}, ""},
		{"a name too long", namedExtractor{name: strings.Repeat("x", wire.MaxExtractorNameLength+1)}, coordinator.ExtractorIdentity{}, "longer than"},
		{"a negative number of shards", namedExtractor{name: "x", shards: -1}, coordinator.ExtractorIdentity{}, "-1 shards"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := identityOf(tc.ex)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("identityOf = %v, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("identityOf = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
