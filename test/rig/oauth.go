package rig

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// TokenServer is a tiny OAuth 2.0 token endpoint for the client-credentials grant (RFC 6749
// section 4.4): a POST with grant_type=client_credentials and the client's id and secret in
// HTTP Basic authentication gets an UnsecuredJWT for Subject, which the rig's OAUTHBEARER
// listener accepts. Anything else gets 400 invalid_request or 401 invalid_client.
type TokenServer struct {
	// URL is the token endpoint.
	URL string
	// ClientID, ClientSecret and Subject are what it accepts and issues.
	ClientID, ClientSecret, Subject string
	// Lifetime is the tokens' exp and expires_in (default 10 minutes).
	Lifetime time.Duration

	srv    *httptest.Server
	issued atomic.Int64
	scope  atomic.Value // last scope requested
}

// StartTokenServer serves a token endpoint on loopback until Close.
func StartTokenServer(clientID, clientSecret, subject string) *TokenServer {
	ts := &TokenServer{ClientID: clientID, ClientSecret: clientSecret, Subject: subject, Lifetime: 10 * time.Minute}
	ts.scope.Store("")
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	ts.URL = ts.srv.URL + "/oauth2/token"
	return ts
}

func (ts *TokenServer) serve(w http.ResponseWriter, r *http.Request) {
	oauthErr := func(status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/oauth2/token" || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		oauthErr(http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok || id != ts.ClientID || secret != ts.ClientSecret {
		oauthErr(http.StatusUnauthorized, "invalid_client")
		return
	}
	ts.scope.Store(r.PostForm.Get("scope"))
	ts.issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": UnsecuredJWT(ts.Subject, ts.Lifetime), "token_type": "Bearer",
		"expires_in": int(ts.Lifetime.Seconds())})
}

// Issued counts the tokens handed out.
func (ts *TokenServer) Issued() int64 { return ts.issued.Load() }

// LastScope is the scope of the last successful request.
func (ts *TokenServer) LastScope() string { return ts.scope.Load().(string) }

// Close stops the server.
func (ts *TokenServer) Close() { ts.srv.Close() }
