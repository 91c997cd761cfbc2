package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bucketops/bucketops/memory"
)

func TestCostGrowsWithTheReleaseAndCountsEvenAnEmptyOne(t *testing.T) {
	for _, tc := range []struct {
		size, want int64
	}{
		{-1, memory.MinCost},
		{0, memory.MinCost},
		{1 << 10, memory.MinCost},
		{1 << 20, memory.PerByte << 20},
		{10 << 20, memory.PerByte * 10 << 20},
	} {
		if got := memory.Cost(tc.size); got != tc.want {
			t.Errorf("Cost(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestBudgetAdmitsWhatFitsAndMakesTheRestWait(t *testing.T) {
	ctx := t.Context()
	const size = 1 << 20
	b := memory.NewBudget(2*memory.Cost(size) + memory.Cost(size)/2)
	first, err := b.Acquire(ctx, time.Second, size)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, time.Second, size)
	if err != nil {
		t.Fatal(err)
	}
	// A diff counts both its releases: it doesn't fit beside the other two.
	if _, err := b.Acquire(ctx, 50*time.Millisecond, size); !errors.Is(err, memory.ErrBusy) {
		t.Fatalf("a third release with room for two: %v, want ErrBusy", err)
	}
	got := make(chan error, 1)
	go func() {
		release, err := b.Acquire(ctx, 5*time.Second, size, size)
		if err == nil {
			release()
		}
		got <- err
	}()
	first()
	select {
	case err := <-got:
		t.Fatalf("a diff of two releases admitted beside one: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	second()
	if err := <-got; err != nil {
		t.Fatalf("a diff once the budget is free: %v", err)
	}
}

func TestWorkLargerThanTheBudgetRunsAlone(t *testing.T) {
	ctx := t.Context()
	b := memory.NewBudget(memory.Cost(1 << 20))
	release, err := b.Acquire(ctx, time.Second, 10<<20)
	if err != nil {
		t.Fatalf("a release over the whole budget: %v, want admitted alone", err)
	}
	if _, err := b.Acquire(ctx, 20*time.Millisecond, 0); !errors.Is(err, memory.ErrBusy) {
		t.Errorf("beside work holding the whole budget: %v, want ErrBusy", err)
	}
	release()
	if r, err := b.Acquire(ctx, time.Second, 0); err != nil {
		t.Errorf("once it is done: %v", err)
	} else {
		r()
	}
}

func TestNoBudgetAdmitsEverything(t *testing.T) {
	var b *memory.Budget = memory.NewBudget(0)
	for range 100 {
		if _, err := b.Acquire(context.Background(), time.Millisecond, 10<<20); err != nil {
			t.Fatal(err)
		}
	}
	if b.Total() != 0 {
		t.Errorf("Total of no bound: %d", b.Total())
	}
}
