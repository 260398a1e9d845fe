package tracing

import (
	"context"
	"testing"
)

func TestEnabledReadsTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{name: "nothing set is off", env: nil, want: false},
		{name: "an endpoint turns it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, want: true},
		{name: "a traces endpoint turns it on", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, want: true},
		{name: "otlp exporter turns it on", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{name: "none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: false},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{name: "an exporter we lack is an error", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Enabled(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSetupOffLeavesNoProvider(t *testing.T) {
	tp, shutdown, err := Setup(context.Background(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if tp != nil {
		t.Fatalf("provider %v with tracing off; want nil, so every traced path stays free", tp)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
