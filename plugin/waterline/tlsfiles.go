package waterline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// tlsCheckInterval is the most often the TLS files are looked at (a stat of each), at a
// handshake. cert-manager renews a Secret in place and the kubelet swaps the mounted files;
// a plugin that read them once would present an expired certificate weeks later.
const tlsCheckInterval = time.Second

// stamp is what tells a changed file from an unchanged one.
type stamp struct {
	modTime time.Time
	size    int64
}

// tlsFiles holds the CA pool and client certificate read from TLSArgs' files, and reads
// them again when a file changes. A change is used only when every file loads and the key
// fits the certificate; otherwise the previous material stays, the reason is logged and
// counted, and the files are tried again when they change again.
type tlsFiles struct {
	args *TLSArgs

	mu      sync.Mutex
	checked time.Time
	tried   []stamp
	pool    *x509.CertPool   // nil: the system roots
	cert    *tls.Certificate // nil: no client certificate
}

func newTLSFiles(args *TLSArgs) (*tlsFiles, error) {
	f := &tlsFiles{args: args, tried: stamps(args)}
	pool, cert, err := loadTLS(args)
	if err != nil {
		return nil, err
	}
	f.pool, f.cert = pool, cert
	return f, nil
}

func (f *tlsFiles) paths() []string {
	var paths []string
	for _, p := range []string{f.args.CAFile, f.args.CertFile, f.args.KeyFile} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

func stamps(args *TLSArgs) []stamp {
	f := tlsFiles{args: args}
	var out []stamp
	for _, p := range f.paths() {
		var s stamp
		if info, err := os.Stat(p); err == nil {
			s = stamp{modTime: info.ModTime(), size: info.Size()}
		}
		out = append(out, s)
	}
	return out
}

func equalStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].modTime.Equal(b[i].modTime) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

func loadTLS(args *TLSArgs) (*x509.CertPool, *tls.Certificate, error) {
	var pool *x509.CertPool
	if args.CAFile != "" {
		pem, err := os.ReadFile(args.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("reading tls.caFile: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls.caFile %s holds no PEM certificate", args.CAFile)
		}
	}
	var cert *tls.Certificate
	if args.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(args.CertFile, args.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("loading tls.certFile/tls.keyFile: %w", err)
		}
		cert = &pair
	}
	return pool, cert, nil
}

// refresh reloads the files when one changed since the last attempt, at most once per
// tlsCheckInterval.
func (f *tlsFiles) refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.checked) < tlsCheckInterval {
		return
	}
	f.checked = now
	current := stamps(f.args)
	if equalStamps(current, f.tried) {
		return
	}
	f.tried = current
	pool, cert, err := loadTLS(f.args)
	if err != nil {
		tlsReloads.WithLabelValues("error").Inc()
		klog.ErrorS(err, "waterline: TLS files changed but cannot be used; keeping the previous CA and client certificate")
		return
	}
	f.pool, f.cert = pool, cert
	tlsReloads.WithLabelValues("ok").Inc()
	klog.InfoS("waterline: TLS files changed; new connections to the scorer use them", "caFile", f.args.CAFile, "certFile", f.args.CertFile)
}

// clientCertificate is the certificate to present (an empty one when none is configured:
// crypto/tls then sends no certificate).
func (f *tlsFiles) clientCertificate() *tls.Certificate {
	f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cert == nil {
		return &tls.Certificate{}
	}
	return f.cert
}

func (f *tlsFiles) roots() *x509.CertPool {
	f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pool
}

// verify checks the scorer's chain against the CA pool in use, as crypto/tls would against
// RootCAs.
func (f *tlsFiles) verify(cs tls.ConnectionState, serverName string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the scorer sent no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         f.roots(),
		Intermediates: intermediates,
		DNSName:       serverName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
