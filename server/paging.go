package server

import (
	"errors"

	"github.com/berth-io/berth/store"
)

// pageError names page_token when the store rejects it.
func pageError(err error, what string) error {
	if errors.Is(err, store.ErrInvalidArgument) {
		var v violations
		v.add("page_token", "not a token from a previous response to the same query")
		return v.err()
	}
	return toStatus(err, what)
}

func pageSize(n int32) int {
	if n <= 0 {
		return defaultPageSize
	}
	return int(n)
}
