// Package delivery is reliable delivery to sharded entities: Akka's
// ShardingProducerController and ShardingConsumerController for protoshard.
//
// A producer numbers the messages it sends to each entity, keeps them until
// the entity confirms them, resends what was lost (an entity restarted by a
// crash, a hand-off or passivation) and holds back what the entity has not
// asked for (flow control). The entity's side delivers each message once and
// in order, and asks for more.
//
// This version holds the bookkeeping of both sides, as plain values with
// checked transitions, and no controller actors: applications cannot use
// it yet.
package delivery
