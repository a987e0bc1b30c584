package e2e

// TLS on every hop of the real control plane (RELIABILITY.md): kube-scheduler →
// extender over HTTPS (the extender config's tlsConfig), the plugin → scorer, extender →
// scorer and scorer → collector, all with client certificates. The leaf certificates of
// every waterline process and of the scheduler are replaced mid-run (a renewal to the next
// CA, which the trust bundle announced in advance: the safe CA rotation, as trust-manager
// distributes it), the processes pick them up without a restart, pods are still placed
// through both paths, and a client trusting only the old CA, or presenting a certificate
// of a CA nobody trusts, is refused.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/waterline/waterline/plugin/testpki"
	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/stack"
)

func newE2ECA(t *testing.T, name string) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// leaf is a certificate of ca for localhost usable as server and client (as cert-manager
// issues with both usages), PEM (cert, key).
func leaf(t *testing.T, ca *testpki.CA) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue("localhost", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// installFile replaces path the way the kubelet updates a mounted Secret: the new file is
// complete before it is renamed over the old one.
func installFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// presentedIssuer dials addr over TLS, trusting roots and presenting client (if any), and
// returns the common name of the issuer of the certificate the server presented; an error
// for a refused handshake. Bounded, so a refusal cannot hang.
func presentedIssuer(addr string, roots *x509.CertPool, client *tls.Certificate) (string, error) {
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	tc := conn.(*tls.Conn)
	// TLS 1.3 servers judge the client certificate after the client's side is done: a
	// read returns their verdict (an alert), or times out when they accepted it.
	_ = tc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := tc.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return "", err
	}
	return tc.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}

func TestTLSEveryHopRotated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, b := range []string{"waterline-collector", "waterline-scorer", "waterline-extender"} {
		stack.NeedBinary(t, b)
	}
	dir := t.TempDir()
	oldCA, nextCA, strangerCA := newE2ECA(t, "waterline CA 1"), newE2ECA(t, "waterline CA 2"), newE2ECA(t, "someone else's CA")
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// The trust bundle holds the current and the next CA from the start.
	installFile(t, caFile, append(append([]byte{}, oldCA.PEM...), nextCA.PEM...))
	cert1, key1 := leaf(t, oldCA)
	installFile(t, certFile, cert1)
	installFile(t, keyFile, key1)

	// The control plane and 4 fake nodes; node-0 is the coolest by far, so every pod
	// placed through waterline lands there (a fail-open or neutral answer spreads them).
	const nodes = 4
	s := stack.ControlPlane(ctx, t, nodes, "8")
	var static strings.Builder
	static.WriteString("nodes:\n")
	for i := 0; i < nodes; i++ {
		busy := 70
		if i == 0 {
			busy = 5
		}
		fmt.Fprintf(&static, "  - {name: %s, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: %d, mem_usage_avg_5m: %d}}\n", stack.NodeName(i), busy, busy)
	}
	staticFile := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(staticFile, []byte(static.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	listener := []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile, "--tls-reload-interval", "500ms"}
	collectorGRPC, collectorAdmin := stack.FreeAddr(t), stack.FreeAddr(t)
	collector := stack.StartProc(t, "collector", stack.NeedBinary(t, "waterline-collector"),
		append([]string{"--grpc-addr", collectorGRPC, "--admin-addr", collectorAdmin, "--static", staticFile}, listener...)...)
	stack.WaitReady(ctx, t, collector, collectorAdmin, 60*time.Second)
	scorerGRPC, scorerAdmin := stack.FreeAddr(t), stack.FreeAddr(t)
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	scorer := stack.StartProc(t, "scorer", stack.NeedBinary(t, "waterline-scorer"), append([]string{
		"--grpc-addr", scorerGRPC, "--admin-addr", scorerAdmin,
		"--collector-url", "https://localhost:" + port(collectorGRPC),
		"--collector-ca", caFile, "--collector-cert", certFile, "--collector-key", keyFile,
	}, listener...)...)
	stack.WaitReady(ctx, t, scorer, scorerAdmin, 60*time.Second)
	extenderHTTP, extenderAdmin := stack.FreeAddr(t), stack.FreeAddr(t)
	extender := stack.StartProc(t, "extender", stack.NeedBinary(t, "waterline-extender"), append([]string{
		"--http-addr", extenderHTTP, "--admin-addr", extenderAdmin,
		"--scorer-url", "https://localhost:" + port(scorerGRPC),
		"--scorer-ca", caFile, "--scorer-cert", certFile, "--scorer-key", keyFile,
		"--scheduler-names", stack.SchedulerName, "--scorer-timeout", "900ms",
	}, listener...)...)
	stack.WaitReady(ctx, t, extender, extenderAdmin, 60*time.Second)

	// One kube-scheduler, two profiles: waterline-scheduler through the HTTPS extender,
	// waterline-plugin through the plugin over mTLS. In-tree scoring is off in both, so
	// waterline's ranking alone decides. The extender answers other profiles' pods
	// neutrally without calling the scorer (--scheduler-names).
	const pluginProfile = "waterline-plugin"
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: %[1]s
    plugins: {score: {disabled: [{name: '*'}]}}
  - schedulerName: %[2]s
    plugins:
      multiPoint: {enabled: [{name: %[3]s, weight: 5}]}
      score: {disabled: [{name: '*'}], enabled: [{name: %[3]s, weight: 5}]}
    pluginConfig:
      - name: %[3]s
        args: {endpoint: %[4]q, timeout: 1s, failOpen: true, tls: {caFile: %[5]q, certFile: %[6]q, keyFile: %[7]q, serverName: localhost}}
`, stack.SchedulerName, pluginProfile, waterline.Name, scorerGRPC, caFile, certFile, keyFile) +
		stack.ExtenderYAML("https://"+extenderHTTP+"/waterline/v1",
			fmt.Sprintf("{caFile: %q, certFile: %q, keyFile: %q, serverName: localhost}", caFile, certFile, keyFile))
	configPath := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	s.StartSchedulerConfig(configPath)

	failOpens0 := stack.PluginCounter("waterline_plugin_fail_open_total")
	// place schedules n pods on each path and checks that every one landed on node-0.
	place := func(round string) {
		t.Helper()
		ns := "tls-" + round
		s.EnsureNamespace(ns)
		// The extender's answers from the scorer (over mTLS), and the scorer's Sessions
		// (the plugin's stream, over mTLS), before the round.
		extenderOK0, _ := stack.AdminSum(extenderAdmin, "waterline_extender_scorer_requests_total", "code", "OK")
		sessions0, _ := stack.AdminSum(scorerAdmin, "waterline_scorer_grpc_requests_total", "method", "Session.Evaluate")
		var pods []*v1.Pod
		var names []string
		for i := 0; i < 3; i++ {
			for _, profile := range []string{stack.SchedulerName, pluginProfile} {
				p := stack.NewPod(ns, fmt.Sprintf("%s-%d", profile, i))
				p.Spec.SchedulerName = profile
				pods = append(pods, p)
				names = append(names, p.Name)
			}
		}
		s.CreatePods(pods, 4)
		placed := s.WaitScheduled(ns, names, 60*time.Second)
		for pod, node := range placed {
			if node != stack.NodeName(0) {
				t.Errorf("%s: pod %s on %s, want %s (the only cool node): waterline was not reached", round, pod, node, stack.NodeName(0))
			}
		}
		fallbacks, err := stack.AdminSum(extenderAdmin, "waterline_extender_fallbacks_total")
		if err != nil || fallbacks != 0 {
			t.Errorf("%s: extender fallbacks %v (%v), want 0: the extender did not reach the scorer", round, fallbacks, err)
		}
		if n := stack.PluginCounter("waterline_plugin_fail_open_total"); n != failOpens0 {
			t.Errorf("%s: plugin failed open %v times", round, n-failOpens0)
		}
		if n, err := stack.AdminSum(extenderAdmin, "waterline_extender_scorer_requests_total", "code", "OK"); err != nil || n < extenderOK0+3 {
			t.Errorf("%s: the extender answered %v pods from the scorer (%v), want >= 3", round, n-extenderOK0, err)
		}
		if n, err := stack.AdminSum(scorerAdmin, "waterline_scorer_grpc_requests_total", "method", "Session.Evaluate"); err != nil || n < sessions0+3 {
			t.Errorf("%s: the scorer answered %v plugin Evaluates on a Session (%v), want >= 3", round, n-sessions0, err)
		}
	}
	place("before")

	// Rotation: every leaf certificate is renewed by the next CA, in place.
	cert2, key2 := leaf(t, nextCA)
	installFile(t, certFile, cert2)
	installFile(t, keyFile, key2)
	for _, p := range []struct {
		name, admin string
		reloads     float64 // listener and, for the scorer and extender, client
	}{{"collector", collectorAdmin, 1}, {"scorer", scorerAdmin, 2}, {"extender", extenderAdmin, 2}} {
		if err := stack.WaitFor(ctx, 30*time.Second, 200*time.Millisecond, p.name+" reloads its TLS files", func() (bool, error) {
			n, err := stack.AdminSum(p.admin, "waterline_tls_reload_total", "result", "ok")
			return n >= p.reloads, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*stack.Proc{collector, scorer, extender} {
		if !p.Running() {
			t.Fatalf("%s exited during the rotation:\n%s", p.Name, p.Tail(4000))
		}
	}

	// New connections get the new certificates on every listener; a client trusting only
	// the old CA is refused, and so is a client certificate of a CA nobody trusts.
	bundle, onlyOld := x509.NewCertPool(), x509.NewCertPool()
	bundle.AddCert(oldCA.Cert)
	bundle.AddCert(nextCA.Cert)
	onlyOld.AddCert(oldCA.Cert)
	client, err := tls.X509KeyPair(cert2, key2)
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey := leaf(t, strangerCA)
	stranger, err := tls.X509KeyPair(strangerCert, strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, addr string }{{"collector", collectorGRPC}, {"scorer", scorerGRPC}, {"extender", extenderHTTP}} {
		issuer, err := presentedIssuer(l.addr, bundle, &client)
		if err != nil || issuer != nextCA.Cert.Subject.CommonName {
			t.Errorf("%s: a new connection got a certificate by %q (%v), want %q", l.name, issuer, err, nextCA.Cert.Subject.CommonName)
		}
		if _, err := presentedIssuer(l.addr, onlyOld, &client); err == nil {
			t.Errorf("%s: a client trusting only the old CA accepted the new certificate", l.name)
		} else if !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("%s: want an unknown-authority handshake error, got %v", l.name, err)
		}
		if _, err := presentedIssuer(l.addr, bundle, &stranger); err == nil {
			t.Errorf("%s: a client certificate of an untrusted CA was accepted", l.name)
		}
	}

	// The scheduler is restarted, so that both of its hops dial again (the plugin reads
	// the renewed client certificate, kube-scheduler's extender client too); the waterline
	// processes run on, and pods are placed through both paths.
	s.StartSchedulerConfig(configPath)
	place("after")
	t.Logf("TLS rotation: pods placed through the extender (HTTPS) and the plugin (mTLS) before and after the renewal; old-CA and untrusted clients refused")
}
