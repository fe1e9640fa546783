package coordinatoractor

// PutRaw replaces the bytes m keeps, as a new version, behind the store's
// back: how the contract tests store undecodable bytes.
func PutRaw(m *MemoryStore, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = data
	m.version++
}
