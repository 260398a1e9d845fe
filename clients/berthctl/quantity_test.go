package main

import "testing"

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		resource, in string
		want         int64
		wantErr      bool
	}{
		{resource: "cpu", in: "2", want: 2000},
		{resource: "cpu", in: "500m", want: 500},
		{resource: "cpu", in: "0.5", want: 500},
		{resource: "cpu", in: "1.25", want: 1250},
		{resource: "cpu", in: "0.0001", want: 1}, // rounds up to a millicore
		{resource: "cpu", in: "4000m", want: 4000},
		{resource: "cpu", in: "1k", want: 1_000_000},
		{resource: "memory", in: "8Gi", want: 8 << 30},
		{resource: "memory", in: "1.5Gi", want: 3 << 29},
		{resource: "memory", in: "512Mi", want: 512 << 20},
		{resource: "memory", in: "64Ki", want: 64 << 10},
		{resource: "memory", in: "2Ti", want: 2 << 40},
		{resource: "memory", in: "1k", want: 1000},
		{resource: "memory", in: "1M", want: 1_000_000},
		{resource: "memory", in: "3G", want: 3_000_000_000},
		{resource: "memory", in: "123456", want: 123456},
		{resource: "memory", in: "1500m", want: 2}, // 1.5 bytes rounds up
		{resource: "ephemeral-storage", in: "100Gi", want: 100 << 30},
		{resource: "pods", in: "110", want: 110},
		{resource: "example.com/gpu", in: "2", want: 2},
		{resource: "memory", in: "8Ei", want: 0, wantErr: true}, // overflows int64
		{resource: "memory", in: "", wantErr: true},
		{resource: "memory", in: "Gi", wantErr: true},
		{resource: "memory", in: "1GB", wantErr: true},
		{resource: "memory", in: "-1Gi", wantErr: true},
		{resource: "memory", in: "1e3", want: 1000},
		{resource: "cpu", in: "2e3", want: 2_000_000},
		{resource: "cpu", in: "1.5", want: 1500},
		{resource: "memory", in: "256Mi", want: 256 << 20},
		{resource: "memory", in: "1/2", wantErr: true},
		{resource: "memory", in: "1..5", wantErr: true},
		{resource: "cpu", in: "1 m", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseQuantity(tt.resource, tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseQuantity(%q, %q) error = %v, wantErr %v", tt.resource, tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("parseQuantity(%q, %q) = %d, want %d", tt.resource, tt.in, got, tt.want)
		}
	}
}

func TestFormatQuantity(t *testing.T) {
	tests := []struct {
		resource string
		in       int64
		want     string
	}{
		{"cpu", 4000, "4"},
		{"cpu", 500, "500m"},
		{"cpu", 0, "0"},
		{"memory", 8 << 30, "8Gi"},
		{"memory", 3 << 29, "1536Mi"},
		{"memory", 1000, "1000"},
		{"memory", 0, "0"},
		{"ephemeral-storage", 1 << 40, "1Ti"},
		{"hugepages-2Mi", 4 << 20, "4Mi"},
		{"pods", 1024, "1024"},
		{"example.com/gpu", 2, "2"},
	}
	for _, tt := range tests {
		if got := formatQuantity(tt.resource, tt.in); got != tt.want {
			t.Errorf("formatQuantity(%q, %d) = %q, want %q", tt.resource, tt.in, got, tt.want)
		}
		// What is printed parses back to the same amount.
		if back, err := parseQuantity(tt.resource, formatQuantity(tt.resource, tt.in)); err != nil || back != tt.in {
			t.Errorf("round trip of %s %d gave %d, %v", tt.resource, tt.in, back, err)
		}
	}
}
