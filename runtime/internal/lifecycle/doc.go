// Package lifecycle is the state machine of a suspended rollout: its whole
// state as one value (State), the events that can happen to it (Event),
// who sends a client's event (Sender), and the one function that decides
// each event in each state (Decide), which State.Apply applies.
//
// A State's fields are unexported, so no code outside this package can
// change one but through Apply: the runtime's suspension holds a State
// under its lock and submits events; it never computes or assigns a next
// state. What an event is refused with is a Verdict here; the refusal a
// client reads (its code and message) is built by the runtime from it.
//
// It is pure: no I/O, no goroutines, no clock. Timers, stores and
// connections stay with the runtime, which turns what they do into events.
package lifecycle
