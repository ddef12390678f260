package main

import (
	"strings"
	"testing"
)

func TestParseDoc(t *testing.T) {
	r, err := parseDoc("ReasonX", "X", "ReasonX: the thing\nhappened. Do: fix\nit.\n")
	if err != nil || r.meaning != "the thing happened." || r.do != "fix it." || r.kind != "" {
		t.Errorf("parseDoc = %+v, %v", r, err)
	}
	r, err = parseDoc("EventY", "Y", "EventY (Warning): gone.")
	if err != nil || r.kind != "Warning" || r.meaning != "gone." || r.do != "" {
		t.Errorf("parseDoc with a kind = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "Another: meaning.", "ReasonX meaning.", "ReasonX: Do: only that."} {
		if _, err := parseDoc("ReasonX", "X", bad); err == nil {
			t.Errorf("parseDoc(%q): no error", bad)
		}
	}
}

// Every reason of the API has a doc comment the page can use, and every reason that reports
// a failure the user must act on says what to do.
func TestEveryReasonIsDocumented(t *testing.T) {
	rs, err := reasons("../../api/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 50 {
		t.Fatalf("%d reasons read; the API has more", len(rs))
	}
	for _, name := range []string{"ReasonOutOfBrokerBounds", "ReasonConflict", "ReasonShareStateUncreatable", "ReasonSecretNotFound", "ReasonReadBackMismatch"} {
		found := false
		for _, r := range rs {
			if r.name == name {
				found = true
				if !strings.Contains(r.do, " ") {
					t.Errorf("%s has no Do: sentence", name)
				}
			}
		}
		if !found {
			t.Errorf("%s not read", name)
		}
	}
}
