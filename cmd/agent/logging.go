/*
Copyright 2026 The agentlane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

	http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/
package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logOptions are the agent's logging flags. They take the same names and
// values as the manager's and the worker's --zap-* flags, without linking
// controller-runtime into an agent that only speaks HTTP.
type logOptions struct {
	development bool
	encoder     string // "json" or "console"; empty: by mode
	level       *zapcore.Level
	stacktrace  *zapcore.Level
	timeEncoder zapcore.TimeEncoder
}

func (o *logOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.development, "zap-devel", false,
		"Development Mode defaults(encoder=consoleEncoder,logLevel=Debug,stackTraceLevel=Warn). "+
			"Production Mode defaults(encoder=jsonEncoder,logLevel=Info,stackTraceLevel=Error)")
	fs.Func("zap-encoder", "Zap log encoding (one of 'json' or 'console')", func(v string) error {
		switch v = strings.ToLower(v); v {
		case "json", "console":
			o.encoder = v
			return nil
		}
		return fmt.Errorf("invalid encoder value %q", v)
	})
	fs.Func("zap-log-level", "Zap Level to configure the verbosity of logging. Can be one of 'debug', 'info', 'error', 'panic'"+
		" or any integer value > 0 which corresponds to custom debug levels of increasing verbosity", func(v string) error {
		l, err := parseLevel(v, true)
		o.level = l
		return err
	})
	fs.Func("zap-stacktrace-level", "Zap Level at and above which stacktraces are captured (one of 'info', 'error', 'panic').", func(v string) error {
		l, err := parseLevel(v, false)
		o.stacktrace = l
		return err
	})
	fs.Func("zap-time-encoding", "Zap time encoding (one of 'epoch', 'millis', 'nano', 'iso8601', 'rfc3339' or 'rfc3339nano'). Defaults to 'epoch'.", func(v string) error {
		var enc zapcore.TimeEncoder
		if err := enc.UnmarshalText([]byte(v)); err != nil {
			return err
		}
		o.timeEncoder = enc
		return nil
	})
}

// parseLevel reads a level name or, where verbose is allowed, a positive
// integer that enables debug levels of increasing verbosity.
func parseLevel(v string, verbose bool) (*zapcore.Level, error) {
	names := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel, "panic": zapcore.PanicLevel}
	if l, ok := names[strings.ToLower(v)]; ok && (verbose || l != zapcore.DebugLevel) {
		return &l, nil
	}
	if n, err := strconv.Atoi(v); err == nil && verbose && n > 0 {
		l := zapcore.Level(-n)
		return &l, nil
	}
	return nil, fmt.Errorf("invalid log level %q", v)
}

// logger builds the logger the flags describe, writing to w.
func (o *logOptions) logger(w io.Writer) logr.Logger {
	cfg := zap.NewProductionEncoderConfig()
	level, stacktrace, encoder := zapcore.InfoLevel, zapcore.ErrorLevel, "json"
	var opts []zap.Option
	if o.development {
		cfg = zap.NewDevelopmentEncoderConfig()
		level, stacktrace, encoder = zapcore.DebugLevel, zapcore.WarnLevel, "console"
		opts = append(opts, zap.Development())
	}
	if o.level != nil {
		level = *o.level
	}
	if o.stacktrace != nil {
		stacktrace = *o.stacktrace
	}
	if o.encoder != "" {
		encoder = o.encoder
	}
	cfg.EncodeTime = zapcore.RFC3339TimeEncoder
	if o.timeEncoder != nil {
		cfg.EncodeTime = o.timeEncoder
	}
	enc := zapcore.NewJSONEncoder(cfg)
	if encoder == "console" {
		enc = zapcore.NewConsoleEncoder(cfg)
	}
	sink := zapcore.AddSync(w)
	core := zapcore.NewCore(enc, sink, zap.NewAtomicLevelAt(level))
	if !o.development && level > zapcore.Level(-2) {
		core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	}
	opts = append(opts, zap.ErrorOutput(sink), zap.AddStacktrace(stacktrace))
	return zapr.NewLogger(zap.New(core, opts...))
}
