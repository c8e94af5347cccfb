package inbox

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"

	"github.com/sandboxflow/sandboxflow/approval"
)

const (
	challengeRegister = "register"
	challengeLogin    = "login"
	// challengeTTL is how long a registration or sign-in may take.
	challengeTTL = 5 * time.Minute
	// webauthnTimeoutMillis is the browser's timeout for create and get.
	webauthnTimeoutMillis = 120000
)

// principalRE is what a new passkey's principal may look like.
var principalRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeRefusal(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// handleSignInPage shows sign-in and registration. It starts an anonymous sign-in, whose CSRF
// token the page's requests carry.
func (s *Server) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	who := s.signIns.getOrCreate(w, r)
	data := s.pageData(who, "Sign in")
	if who.principal != "" {
		if s.reviewers.lists(who.principal, who.fingerprint) {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		data.Notice = "Your passkey is not in the reviewers file (any more)."
	}
	if _, err := s.reviewers.get(); err != nil {
		data.Notice = "No reviewer can sign in yet: the reviewers file " + s.cfg.ReviewersPath + " is missing or unreadable."
	}
	data.ReviewersPath = s.cfg.ReviewersPath
	data.RPID = s.rpID
	s.render(w, "signin", data)
}

type registerBegin struct {
	Name string `json:"name"`
}

// handleRegisterBegin returns the options of navigator.credentials.create for a new passkey.
func (s *Server) handleRegisterBegin(w http.ResponseWriter, r *http.Request, who *signIn) {
	var in registerBegin
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !principalRE.MatchString(in.Name) {
		writeRefusal(w, http.StatusBadRequest, "a name of letters, digits and . _ @ + - (at most 64)")
		return
	}
	ch := s.newChallenge(who, challengeRegister, in.Name)
	userID := []byte(randomToken())[:16]
	writeJSON(w, http.StatusOK, map[string]any{
		"challenge": b64url(ch),
		"rp":        map[string]string{"id": s.rpID, "name": "sandboxflow inbox"},
		"user":      map[string]string{"id": b64url(userID), "name": in.Name, "displayName": in.Name},
		"pubKeyCredParams": []map[string]any{
			{"type": "public-key", "alg": int(webauthncose.AlgES256)},
		},
		"authenticatorSelection": map[string]any{"residentKey": "required", "requireResidentKey": true, "userVerification": "required"},
		"attestation":            "none",
		"timeout":                webauthnTimeoutMillis,
	})
}

// handleRegisterFinish checks the new passkey and returns the reviewers-file line for it. It
// grants nothing: the sign-in stays anonymous until an operator adds the line and its owner
// signs in.
func (s *Server) handleRegisterFinish(w http.ResponseWriter, r *http.Request, who *signIn, ch []byte) {
	name := who.registerName
	line, err := s.passkeyLine(r.Body, ch, name)
	if err != nil {
		s.log.Warn("inbox: passkey registration refused", "error", err)
		writeRefusal(w, http.StatusBadRequest, err.Error())
		return
	}
	out := map[string]string{"line": line, "reviewers": s.cfg.ReviewersPath}
	if n := s.reviewers.keysOf(name); n > 0 {
		out["warning"] = fmt.Sprintf("%s is already listed in the reviewers file (%d key(s)): this line would give %s one more key, "+
			"whoever registered it. Add it only if you know this passkey is %s's; anyone else registers under a name of their own.", name, n, name, name)
		s.log.Warn("inbox: passkey registered under a principal the reviewers file already lists", "principal", name, "keys", n)
	}
	s.log.Info("inbox: passkey registered; an operator must add its line to the reviewers file", "principal", name, "reviewers", s.cfg.ReviewersPath)
	writeJSON(w, http.StatusOK, out)
}

// passkeyLine verifies a registration response (client data, relying party, user presence and
// verification, ES256) and writes the passkey's reviewers-file line.
func (s *Server) passkeyLine(body io.Reader, challenge []byte, name string) (string, error) {
	pcc, err := protocol.ParseCredentialCreationResponseBody(body)
	if err != nil {
		return "", fmt.Errorf("inbox: registration: %w", err)
	}
	params := []protocol.CredentialParameter{{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256}}
	if _, err := pcc.Verify(b64url(challenge), s.rpID, []string{s.cfg.Origin}, nil, nil, protocol.TopOriginImplicitVerificationMode,
		false, true, true, nil, params, protocol.AttestationPolicy{}, protocol.SignaturePolicy{}); err != nil {
		return "", fmt.Errorf("inbox: registration: %w", err)
	}
	att := pcc.Response.AttestationObject.AuthData.AttData
	key, err := webauthncose.ParsePublicKey(att.CredentialPublicKey)
	if err != nil {
		return "", fmt.Errorf("inbox: registration: public key: %w", err)
	}
	ec, ok := key.(webauthncose.EC2PublicKeyData)
	if !ok || ec.Algorithm != int64(webauthncose.AlgES256) {
		return "", errors.New("inbox: registration: the passkey's key is not ES256 (ECDSA P-256)")
	}
	pub, err := ec.ToECDSA()
	if err != nil {
		return "", fmt.Errorf("inbox: registration: public key: %w", err)
	}
	authorized, err := approval.PasskeyAuthorizedKey(pub, s.rpID)
	if err != nil {
		return "", fmt.Errorf("inbox: registration: %w", err)
	}
	return name + " " + authorized + " passkey rp=" + s.rpID + " credential=" + b64url(att.CredentialID), nil
}

// handleLoginBegin returns the options of navigator.credentials.get for signing in.
func (s *Server) handleLoginBegin(w http.ResponseWriter, r *http.Request, who *signIn) {
	ch := s.newChallenge(who, challengeLogin, "")
	writeJSON(w, http.StatusOK, map[string]any{
		"challenge":        b64url(ch),
		"rpId":             s.rpID,
		"userVerification": "required",
		"timeout":          webauthnTimeoutMillis,
	})
}

// handleLoginFinish verifies a sign-in assertion against the reviewers file and, when it is a
// listed reviewer's passkey, replaces the anonymous sign-in with a signed-in one.
func (s *Server) handleLoginFinish(w http.ResponseWriter, r *http.Request, who *signIn, ch []byte) {
	var a approval.WebAuthnAssertion
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
		writeRefusal(w, http.StatusBadRequest, "inbox: sign-in: "+err.Error())
		return
	}
	reviewers, err := s.reviewers.get()
	if err != nil {
		writeRefusal(w, http.StatusForbidden, "no reviewer can sign in: the reviewers file is missing or unreadable; ask an operator to add your line")
		return
	}
	v, err := approval.VerifyPasskeyLogin(reviewers, &a, ch, s.cfg.Origin, s.cfg.Now())
	if err == nil {
		err = s.counters.Advance(v)
	}
	if err != nil {
		s.log.Warn("inbox: sign-in refused", "error", err)
		writeRefusal(w, http.StatusForbidden, "sign-in refused: "+err.Error()+signInHint(err))
		return
	}
	s.signIns.signIn(w, who, v.Principal, v.Fingerprint, a.CredentialID)
	s.log.Info("inbox: reviewer signed in", "principal", v.Principal, "fingerprint", v.Fingerprint)
	writeJSON(w, http.StatusOK, map[string]string{"principal": v.Principal})
}

// handleSignOut ends the sign-in.
func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if who := s.signIns.get(r); who != nil {
		s.signIns.signOut(who)
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// withSignIn serves h to a request that has a sign-in (signed in or anonymous), and refuses any
// other.
func (s *Server) withSignIn(h func(http.ResponseWriter, *http.Request, *signIn)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who := s.signIns.get(r)
		if who == nil {
			writeRefusal(w, http.StatusUnauthorized, "no sign-in goes with this request (it ended, or cookies are off): reload this page and try again")
			return
		}
		h(w, r, who)
	}
}

// withChallenge serves h, the end of a passkey ceremony of kind, with the challenge its begin
// handler gave the request's sign-in, taken once. Without one (no sign-in, no ceremony of that
// kind in progress, or it took longer than challengeTTL) the request is refused.
func (s *Server) withChallenge(kind, what string, h func(http.ResponseWriter, *http.Request, *signIn, []byte)) http.HandlerFunc {
	return s.withSignIn(func(w http.ResponseWriter, r *http.Request, who *signIn) {
		ch := s.signIns.takeChallenge(who.id, kind, challengeTTL)
		if ch == nil {
			writeRefusal(w, http.StatusBadRequest, "no "+what+" in progress (it took too long, or another tab started one): click the button again")
			return
		}
		h(w, r, who, ch)
	})
}

// newChallenge gives who a fresh challenge for a ceremony of kind (and, for a registration, the
// name being registered), replacing any earlier one; takeChallenge takes it once.
func (s *Server) newChallenge(who *signIn, kind, registerName string) []byte {
	ch := []byte(randomToken())
	s.signIns.update(who.id, func(x *signIn) {
		x.challenge, x.challengeKind, x.challengeAt, x.registerName = ch, kind, s.cfg.Now(), registerName
	})
	return ch
}

// signInHint is what a reviewer can do about a refused sign-in: a passkey the reviewers file
// does not list needs its line added by an operator (registering gives it).
func signInHint(err error) string {
	var ref *approval.RefusalError
	if errors.As(err, &ref) && ref.Reason == approval.ReasonUnknownKey {
		return ". If you registered this passkey, ask an operator to add its line to the reviewers file; otherwise register one below"
	}
	return ""
}
