package waterline

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "waterline test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for dnsName as PEM files (cert, key) in dir.
func (ca *testCA) issue(t *testing.T, dir, dnsName string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, dnsName+".crt"), filepath.Join(dir, dnsName+".key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
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
