// Package delivery is reliable delivery to sharded entities: Akka's
// ShardingProducerController and ShardingConsumerController for protoshard.
//
// A producer numbers the messages it sends to each entity, keeps them until
// the entity confirms them, resends what was lost (an entity restarted by a
// crash, a hand-off or passivation) and holds back what the entity has not
// asked for (flow control). The entity's side delivers each message once and
// in order, and asks for more.
//
// A producer starts a ShardingProducerController and sends through it; an
// entity holds a ShardingConsumerController, passes it its messages in
// Receive, and confirms what it processed. An entity that stores
// ProgressAfter with its own state in one write processes no message twice,
// even across a crash; one that does not may process again, after it
// restarted, what its earlier incarnation processed but had not yet
// confirmed to the producer.
//
// Without a durable queue, a producer that stops loses what its entities
// have not confirmed, with a dead-letter event each. With one
// (WithDurableQueue: NewMemoryQueue, OpenFileQueue, or the
// Consul queue of actorsharding/consulstore), Send returns once the
// message is stored, and a controller started again with the queue sends
// what was not confirmed, under its stored numbers, before anything new:
// an entity that stores its progress drops what it processed already.
//
// Not yet: Akka's RequestNext protocol for producers that are actors, and
// Send waiting for room in a full buffer (it fails with ErrBufferFull).
package delivery
