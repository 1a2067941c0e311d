package websearch

import "errors"

var (
	// ErrInvalidArguments is returned by a tool's Call when the model's
	// arguments cannot be used; the message says what was wrong.
	ErrInvalidArguments = errors.New("websearch: invalid arguments")

	// ErrEmptyQuery is returned by a Searcher for a query that is empty or
	// only white space.
	ErrEmptyQuery = errors.New("websearch: empty search query")
)
