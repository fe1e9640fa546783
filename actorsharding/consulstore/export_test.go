package consulstore

// The key layout and the defaults, for the tests of package
// consulstore_test.
var (
	RememberEntitiesPrefix     = rememberEntitiesPrefix
	DurableProducerQueuePrefix = durableProducerQueuePrefix
)

const (
	DefaultRememberBuckets        = defaultRememberBuckets
	DefaultRememberMaxBucketBytes = defaultRememberMaxBucketBytes
)
