package consul

// MaxPayloadBytes exports maxPayloadBytes to the tests.
const MaxPayloadBytes = maxPayloadBytes

// Key exports key to the tests.
func (s *Store) Key(entityID string) string { return s.key(entityID) }
