package cri

import (
	"context"

	"github.com/nodekit/nodekit/runtime/criclient"
)

// Client is the CRI client of package criclient, which holds it and its
// options, errors and conversions.
type Client = criclient.Client

// Dial is a shorthand for criclient.Dial, kept so that code written when
// the client lived in this package compiles unchanged.
func Dial(ctx context.Context, endpoint string, opts ...criclient.DialOption) (*Client, error) {
	return criclient.Dial(ctx, endpoint, opts...)
}
