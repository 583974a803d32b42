// Package volumestest holds test support for the volumes package: Tokens,
// an in-memory TokenGetter that hands out predictable tokens.
package volumestest
