package podsource

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestJoinErrorsMatchesAggregate: up to maxListedErrors errors, the
// message is the API server's aggregate message, repeated messages left
// out; past it, the first ones and the count of the others.
func TestJoinErrorsMatchesAggregate(t *testing.T) {
	list := func(n int) field.ErrorList {
		var errs field.ErrorList
		for i := range n {
			errs = append(errs, field.Required(field.NewPath("spec", "containers").Index(0).Child("env").Index(i).Child("name"), ""))
		}
		return errs
	}
	if err := joinErrors(nil); err != nil {
		t.Errorf("no errors gave %v", err)
	}
	for _, errs := range []field.ErrorList{
		list(1),
		list(2),
		list(maxListedErrors),
		append(list(3), list(3)...),
		append(list(1), list(1)...),
		{field.Invalid(field.NewPath("spec", "dnsConfig", "nameservers"), []string{"a", "b"}, "too many")},
	} {
		if got, want := joinErrors(errs).Error(), errs.ToAggregate().Error(); got != want {
			t.Errorf("%d errors: got\n%s\nwant\n%s", len(errs), got, want)
		}
	}

	errs := list(maxListedErrors + 50)
	got := joinErrors(errs).Error()
	want := errs[:maxListedErrors].ToAggregate().Error()
	want = want[:len(want)-1] + "] and 50 more errors"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// worstCaseManifest is a manifest of about size bytes whose env list is
// all empty items: one error each, the most errors a byte buys.
func worstCaseManifest(size int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    env: [{}")
	for b.Len() < size-2 {
		b.WriteString(",{}")
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// BenchmarkLoadWorstCaseManifest measures what a File source spends on
// the manifest of DefaultMaxManifestBytes with the most validation errors.
func BenchmarkLoadWorstCaseManifest(b *testing.B) {
	data := worstCaseManifest(DefaultMaxManifestBytes)
	seen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		pods, err := decode(data, false)
		if err != nil {
			b.Fatal(err)
		}
		if err := makeStatic(pods[0], SourceFile, "/etc/kubernetes/manifests/big.yaml", "n", seen); err == nil {
			b.Fatal("the manifest passed validation")
		} else if n := len(err.Error()); n > 64<<10 {
			b.Fatalf("a message of %d bytes", n)
		}
	}
}
