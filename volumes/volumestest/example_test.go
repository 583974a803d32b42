package volumestest_test

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/volumes/volumestest"
)

func ExampleTokens() {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokens := &volumestest.Tokens{Clock: clocktesting.NewFakePassiveClock(now)}
	exp := int64(600)
	tr, err := tokens.GetServiceAccountToken(context.Background(), "default", "builder", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: &exp},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tr.Status.Token, tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
	fmt.Println(len(tokens.Requests()), "request")
	// Output:
	// token-1:default/builder:vault 2026-01-02T03:14:05Z
	// 1 request
}
