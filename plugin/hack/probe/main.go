// Command probe asks a waterline scorer what it would answer for a pod and lists a
// collector's ledger: a debugging aid for the smoke run (hack/smoke-e2e.sh) and by hand.
//
//	probe score SCORER_ADDR CPU_MILLIS MEMORY_BYTES NODE...   prints "rejected NODE REASON",
//	                                                          "score NODE N" and "best NODE..."
//	probe ledger COLLECTOR_ADDR                               prints one line per ledger entry
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: probe score ADDR CPU_MILLIS MEMORY_BYTES NODE... | probe ledger ADDR")
	}
	conn, err := grpc.NewClient(args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	switch args[0] {
	case "score":
		if len(args) < 5 {
			return fmt.Errorf("score needs ADDR CPU_MILLIS MEMORY_BYTES NODE...")
		}
		cpu, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return err
		}
		mem, err := strconv.ParseInt(args[3], 10, 64)
		if err != nil {
			return err
		}
		return score(ctx, waterlinev1.NewScorerServiceClient(conn), &waterlinev1.PodInfo{
			Namespace: "default", Name: "probe", Uid: "probe", CpuRequestMillis: cpu, MemoryRequestBytes: mem,
		}, args[4:])
	case "ledger":
		resp, err := waterlinev1.NewCollectorServiceClient(conn).ListNodes(ctx, &waterlinev1.ListNodesRequest{})
		if err != nil {
			return err
		}
		for _, e := range resp.GetLedger() {
			fmt.Printf("ledger %s/%s uid=%s node=%s source=%s placed_at=%s\n", e.GetNamespace(), e.GetName(),
				e.GetPodUid(), e.GetNodeName(), e.GetSource(), e.GetPlacedAt().AsTime().Format(time.RFC3339Nano))
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// score runs Filter then Score the way the plugin does and names the best feasible node.
func score(ctx context.Context, c waterlinev1.ScorerServiceClient, pod *waterlinev1.PodInfo, nodes []string) error {
	f, err := c.Filter(ctx, &waterlinev1.FilterRequest{Pod: pod, NodeNames: nodes})
	if err != nil {
		return err
	}
	var feasible []string
	for _, n := range nodes {
		if reason, out := f.GetRejected()[n]; out {
			fmt.Printf("rejected %s %s\n", n, reason)
		} else {
			feasible = append(feasible, n)
		}
	}
	if len(feasible) == 0 {
		return nil
	}
	s, err := c.Score(ctx, &waterlinev1.ScoreRequest{Pod: pod, NodeNames: feasible})
	if err != nil {
		return err
	}
	// Ties are listed together: the scheduler picks one of them at random.
	var best []string
	bestScore := int32(-1)
	for _, ns := range s.GetScores() {
		fmt.Printf("score %s %d\n", ns.GetNodeName(), ns.GetScore())
		switch {
		case ns.GetScore() > bestScore:
			best, bestScore = []string{ns.GetNodeName()}, ns.GetScore()
		case ns.GetScore() == bestScore:
			best = append(best, ns.GetNodeName())
		}
	}
	fmt.Println("best", strings.Join(best, " "))
	return nil
}
