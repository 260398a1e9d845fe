package hugeheap

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestHugePageCandidates(t *testing.T) {
	maps := []byte(`00400000-01053000 r-xp 00000000 00:2f 123 /usr/bin/berth
01f3f000-02000000 rw-p 00000000 00:00 0 
3ed792800000-3ed793000000 ---p 00000000 00:00 0 
3ed793000000-3ed797c00000 rw-p 00000000 00:00 0 
3ed797d00000-3ed797f00000 rw-p 00000000 00:00 0 
3ed798100000-3ed798400000 rw-p 00000000 00:00 0 
7f4f10000000-7f5050000000 r--s 00000000 fd:00 77 /data/member/snap/db
7f5060000000-7f5061000000 rw-s 00000000 00:01 88 /dev/zero (deleted)
7ffcfb400000-7ffcfb800000 rw-p 00000000 00:00 0 [stack]
garbage line
`)
	want := []mapping{
		// 0x1f3f000-0x2000000 holds no whole huge page: dropped.
		{0x3ed793000000, 0x3ed797c00000}, // already aligned
		// 0x3ed797d00000-0x3ed797f00000 holds no whole huge page once aligned: dropped.
		{0x3ed798200000, 0x3ed798400000}, // start rounded up
	}
	if got := hugePageCandidates(maps); !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates = %#v, want %#v", got, want)
	}
}

func TestHeapAdviceSize(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name     string
		limit    int64
		memTotal uint64
		want     int64
	}{
		{"half the machine", math.MaxInt64, 6 * gib, 3 * gib},
		{"capped", math.MaxInt64, 64 * gib, maxHeapAdvice},
		{"the memory limit", 2 * gib, 64 * gib, 2 * gib},
		{"whole chunks", 100<<20 + 1, 64 * gib, premapChunk},
		{"unknown machine", math.MaxInt64, 0, maxHeapAdvice},
	} {
		if got := Size(tc.limit, tc.memTotal); got != tc.want {
			t.Errorf("%s: Size(%d, %d) = %d, want %d", tc.name, tc.limit, tc.memTotal, got, tc.want)
		}
	}
}

func TestMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{"always [madvise] never\n", "madvise"},
		{"[always] madvise never\n", "always"},
		{"always madvise [never]\n", "never"},
		{"always madvise never\n", "unknown"},
		{"always [madvise", "unknown"},
	} {
		path := filepath.Join(dir, "enabled")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := Mode(path); got != tc.want {
			t.Errorf("Mode(%q) = %q, want %q", tc.content, got, tc.want)
		}
	}
	if got := Mode(filepath.Join(dir, "absent")); got != "unknown" {
		t.Errorf("Mode(no file) = %q, want unknown", got)
	}
}
