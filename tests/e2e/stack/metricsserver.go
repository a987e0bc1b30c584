package stack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/waterline/waterline/tests/e2e/harness"
)

// The Service and APIService the fake metrics-server is registered under: what a real
// metrics-server install creates (kube-system/metrics-server, v1beta1.metrics.k8s.io).
const (
	MetricsServiceNamespace = "kube-system"
	MetricsServiceName      = "metrics-server"
	MetricsAPIService       = "v1beta1.metrics.k8s.io"
)

// MetricsNode is what the fake metrics-server reports for one node.
type MetricsNode struct {
	Name        string
	CPUMillis   int64
	MemoryBytes int64
}

// MetricsServer stands in for metrics-server (the real one scrapes kubelets, which fake
// nodes do not have): an HTTPS server on loopback that answers the metrics.k8s.io/v1beta1
// discovery and the NodeMetrics list, each item stamped with the current second. Register
// puts it behind the control plane's aggregation layer; clients reach it only through the
// API server.
type MetricsServer struct {
	Addr string
	Port int
	// CABundle is the PEM CA that signed the serving certificate (the APIService's caBundle).
	CABundle []byte
	// NodeLists counts the NodeMetrics lists served.
	NodeLists atomic.Int64

	srv   *http.Server
	mu    sync.Mutex
	nodes []MetricsNode
}

// StartMetricsServer serves nodes on a free loopback port, with a certificate for
// metrics-server.kube-system.svc (the name the aggregator verifies).
func StartMetricsServer(t testing.TB, nodes []MetricsNode) *MetricsServer {
	t.Helper()
	ca, cert, err := servingCert(MetricsServiceName + "." + MetricsServiceNamespace + ".svc")
	if err != nil {
		t.Fatalf("metrics-server certificate: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &MetricsServer{Addr: ln.Addr().String(), Port: ln.Addr().(*net.TCPAddr).Port, CABundle: ca, nodes: nodes}
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/metrics.k8s.io/v1beta1", m.discovery)
	mux.HandleFunc("/apis/metrics.k8s.io/v1beta1/nodes", m.nodeList)
	m.srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = m.srv.Close() })
	return m
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (m *MetricsServer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
		"resources": []map[string]any{
			{"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": []string{"get", "list"}},
		},
	})
}

func (m *MetricsServer) nodeList(w http.ResponseWriter, _ *http.Request) {
	m.NodeLists.Add(1)
	m.mu.Lock()
	nodes := append([]MetricsNode(nil), m.nodes...)
	m.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	items := make([]map[string]any, 0, len(nodes))
	for _, n := range nodes {
		items = append(items, map[string]any{
			"metadata":  map[string]any{"name": n.Name, "creationTimestamp": now},
			"timestamp": now, "window": "1s",
			// As metrics-server writes them: nanocores and bytes in Ki.
			"usage": map[string]string{
				"cpu":    strconv.FormatInt(n.CPUMillis*1_000_000, 10) + "n",
				"memory": strconv.FormatInt(n.MemoryBytes/1024, 10) + "Ki",
			},
		})
	}
	writeJSON(w, map[string]any{"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": map[string]any{}, "items": items})
}

// Register creates Service kube-system/metrics-server of type ExternalName pointing at
// 127.0.0.1 (the aggregator's service resolver turns an ExternalName into
// https://<externalName>:<port>, so the API server proxies to this loopback server) and
// APIService v1beta1.metrics.k8s.io with the CA bundle, then waits until the NodeMetrics
// list answers through the API server.
func (m *MetricsServer) Register(ctx context.Context, t testing.TB, c *harness.Cluster) {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServiceName, Namespace: MetricsServiceNamespace},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []v1.ServicePort{{Name: "https", Port: int32(m.Port), Protocol: v1.ProtocolTCP}},
		},
	}
	if _, err := c.Client.CoreV1().Services(MetricsServiceNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("metrics-server Service: %v", err)
	}
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": MetricsAPIService},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service":              map[string]any{"namespace": MetricsServiceNamespace, "name": MetricsServiceName, "port": int64(m.Port)},
			"caBundle":             base64.StdEncoding.EncodeToString(m.CABundle), // []byte in the typed API: base64 in JSON
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dyn.Resource(gvr).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatalf("APIService %s: %v", MetricsAPIService, err)
	}
	t0 := time.Now()
	var last error
	for time.Since(t0) < 60*time.Second {
		body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
		if err == nil {
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			if err = json.Unmarshal(body, &list); err == nil && len(list.Items) > 0 {
				t.Logf("metrics-server: NodeMetrics through the aggregation layer after %v (%d items)", time.Since(t0).Round(time.Millisecond), len(list.Items))
				return
			}
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("metrics.k8s.io never answered through the API server: %v", last)
}

// servingCert is a fresh CA (PEM) and a certificate it signed for dnsName.
func servingCert(dnsName string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "waterline-e2e metrics-server CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
