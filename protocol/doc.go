// Package protocol is tether's wire vocabulary: the items, content parts,
// response object, streaming events and client events of the OpenAI Responses
// API and the Open Responses specification, the errors that travel on the wire,
// the JSON codec and request validation.
//
// Everything here is pure: no I/O, no goroutines, no clocks. The runtime
// decides what to send; this package decides how it looks.
//
// Unions (items, content parts, server events, client events) are sealed Go
// interfaces. Each concrete type marshals with its own "type" discriminator, and
// the Decode* functions dispatch on it. Decoders never panic on bad input: they
// return an *Error carrying the code, param and HTTP status a client can act on.
package protocol
