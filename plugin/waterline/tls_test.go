package waterline

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/component-base/metrics/testutil"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/plugin/testpki"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	*testpki.CA
	cert *x509.Certificate
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca, err := testpki.NewCA("waterline test CA")
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{CA: ca, cert: ca.Cert, pem: ca.PEM}
}

// issue returns a leaf certificate for dnsName as PEM files (cert, key) in dir.
func (ca *testCA) issue(t *testing.T, dir, dnsName string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(dnsName, usage)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, dnsName+".crt"), filepath.Join(dir, dnsName+".key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	return certFile, keyFile
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMutualTLS connects the real factory to a scorer that requires a client certificate
// signed by the CA: caFile, certFile/keyFile and serverName all have to work for the
// Evaluate to get through (a failed handshake would fail open and leave the fake uncalled).
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, ca.pem)
	serverCert, serverKey := ca.issue(t, dir, "scorer.waterline.test", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, dir, "kube-scheduler", x509.ExtKeyUsageClientAuth)

	pair, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	})))
	fake := &fakeScorer{nodes: nodeNamesUpTo(3), score: scoreOf}
	waterlinev1.RegisterScorerServiceServer(srv, fake)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	tls := map[string]any{"caFile": caFile, "certFile": clientCert, "keyFile": clientKey, "serverName": "scorer.waterline.test"}
	tfw := newTestFramework(t, New, map[string]any{"endpoint": lis.Addr().String(), "timeout": "5s", "tls": tls}, 3)
	res := tfw.runCycle(t, testPod())
	fake.waitSession(t, "Evaluate and Reserve over mTLS", func(l []sessionMsg) bool {
		return len(of(l, "evaluate")) == 1 && len(of(l, "reserve")) == 1
	})
	if res.scores[nodeName(2)] != scoreOf(nodeName(2))*testWeight {
		t.Fatalf("score over mTLS = %d, want the Evaluate's", res.scores[nodeName(2)])
	}

	// Without the client certificate the server refuses the handshake: the plugin fails
	// open and the fake sees nothing.
	delete(tls, "certFile")
	delete(tls, "keyFile")
	tfw = newTestFramework(t, New, map[string]any{"endpoint": lis.Addr().String(), "timeout": "2s", "tls": tls}, 3)
	assertFailedOpen(t, tfw, tfw.runCycle(t, testPod()))
	if evaluates, _, _ := fake.sessionCalls(); evaluates != 1 {
		t.Fatalf("Evaluates = %d after a refused handshake, want still 1", evaluates)
	}
}

// generation is one set of the plugin's TLS files: a CA, the scorer's certificate and the
// plugin's client certificate, all issued by that CA.
type generation struct {
	ca                     *testCA
	serverCert, serverKey  string
	clientCert, clientKey  string
	serverPair, clientPair tls.Certificate
}

func newGeneration(t *testing.T, dir string) *generation {
	t.Helper()
	g := &generation{ca: newTestCA(t)}
	g.serverCert, g.serverKey = g.ca.issue(t, dir, "scorer.waterline.test", x509.ExtKeyUsageServerAuth)
	g.clientCert, g.clientKey = g.ca.issue(t, dir, "kube-scheduler", x509.ExtKeyUsageClientAuth)
	var err error
	if g.serverPair, err = tls.LoadX509KeyPair(g.serverCert, g.serverKey); err != nil {
		t.Fatal(err)
	}
	if g.clientPair, err = tls.LoadX509KeyPair(g.clientCert, g.clientKey); err != nil {
		t.Fatal(err)
	}
	return g
}

// serverConfig is the scorer's side: this generation's certificate, clients checked
// against this generation's CA.
func (g *generation) serverConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(g.ca.cert)
	return &tls.Config{
		Certificates: []tls.Certificate{g.serverPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"}, // grpc-go requires the ALPN it would get from a gRPC server
	}
}

// install replaces the plugin's files the way the kubelet updates a mounted Secret: each
// new file is complete before it is renamed over the old one.
func (g *generation) install(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []struct{ from, to string }{{"", "ca.crt"}, {g.clientCert, "client.crt"}, {g.clientKey, "client.key"}} {
		data := g.ca.pem
		if f.from != "" {
			var err error
			if data, err = os.ReadFile(f.from); err != nil {
				t.Fatal(err)
			}
		}
		tmp := filepath.Join(dir, "."+f.to+".new")
		writeFile(t, tmp, data)
		if err := os.Rename(tmp, filepath.Join(dir, f.to)); err != nil {
			t.Fatal(err)
		}
	}
}

// handshake runs the plugin's client handshake against a TLS server with config srv, and
// returns the client certificate the server saw. Bounded: a refusal must be an error, not
// a hang.
func handshake(t *testing.T, creds credentials.TransportCredentials, srv *tls.Config) ([]byte, error) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	seen := make(chan []byte, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			seen <- nil
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		if tc.Handshake() != nil || len(tc.ConnectionState().PeerCertificates) == 0 {
			seen <- nil
			return
		}
		seen <- tc.ConnectionState().PeerCertificates[0].Raw
	}()
	raw, err := net.DialTimeout("tcp", lis.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := creds.ClientHandshake(ctx, "scorer.waterline.test", raw)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// TLS 1.3: the server checks the client certificate after the client's side of the
	// handshake is done; its verdict comes from the server's side.
	got := <-seen
	if got == nil {
		return nil, errors.New("the server refused the client certificate")
	}
	return got, nil
}

// eventually retries f until it succeeds, for at most 10 s (the plugin looks at its files
// at most once per tlsCheckInterval).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTLSFilesAreReloaded replaces the CA and client certificate files under a running
// plugin connection's credentials: new handshakes trust the new CA and present the new
// certificate, a half-written file keeps the previous ones (and is counted), and a scorer
// whose certificate no loaded CA signed is refused with an error.
func TestTLSFilesAreReloaded(t *testing.T) {
	registerMetrics()
	dir := t.TempDir()
	old, renewed := newGeneration(t, t.TempDir()), newGeneration(t, t.TempDir())
	old.install(t, dir)
	cfg := config{endpoint: "127.0.0.1:1", tls: &TLSArgs{
		CAFile:     filepath.Join(dir, "ca.crt"),
		CertFile:   filepath.Join(dir, "client.crt"),
		KeyFile:    filepath.Join(dir, "client.key"),
		ServerName: "scorer.waterline.test",
	}}
	creds, err := transportCredentials(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := handshake(t, creds, old.serverConfig())
	if err != nil {
		t.Fatalf("first generation: %v", err)
	}
	if !bytes.Equal(got, old.clientPair.Leaf.Raw) {
		t.Fatal("the server saw another client certificate than the installed one")
	}

	renewed.install(t, dir)
	eventually(t, "handshake with the renewed files", func() error {
		got, err := handshake(t, creds, renewed.serverConfig())
		if err == nil && !bytes.Equal(got, renewed.clientPair.Leaf.Raw) {
			err = errors.New("the old client certificate was presented")
		}
		return err
	})
	// The scorer still presenting the old CA's certificate is no longer trusted.
	if _, err := handshake(t, creds, old.serverConfig()); err == nil {
		t.Fatal("a scorer certificate from the replaced CA was accepted")
	} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("want an unknown-authority error, got %v", err)
	}

	// A half-written certificate: counted, and the renewed files stay in use.
	errors0, _ := testutil.GetCounterMetricValue(tlsReloads.WithLabelValues("error"))
	pem, _ := os.ReadFile(renewed.clientCert)
	writeFile(t, filepath.Join(dir, "client.crt"), pem[:len(pem)/2])
	eventually(t, "the cut file counted", func() error {
		if _, err := handshake(t, creds, renewed.serverConfig()); err != nil {
			return fmt.Errorf("handshake after a cut file: %w", err)
		}
		if n, _ := testutil.GetCounterMetricValue(tlsReloads.WithLabelValues("error")); n != errors0+1 {
			return fmt.Errorf("tls reload errors = %v, want %v", n, errors0+1)
		}
		return nil
	})
}
