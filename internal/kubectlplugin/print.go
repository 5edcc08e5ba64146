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

package kubectlplugin

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// output is the -o flag of a verb: a table by default, or one of
// cli-runtime's printers (json, yaml, name, jsonpath, go-template).
type output struct {
	flags *genericclioptions.PrintFlags
}

// addOutput adds -o to cmd. operation is what the name printer says after
// each object ("patched", "created"); empty for listing verbs, which also
// take -o wide.
func addOutput(cmd *cobra.Command, operation string) *output {
	o := &output{flags: genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme)}
	o.flags.AddFlags(cmd)
	if f := cmd.Flags().Lookup("output"); f != nil {
		if operation == "" {
			f.Usage = "Output format: a table by default, or wide (more columns), " + strings.Join(o.flags.AllowedFormats(), ", ") + "."
		} else {
			f.Usage = "Output format: the name of each object written by default, or " + strings.Join(o.flags.AllowedFormats(), ", ") + "."
		}
	}
	// A format no printer knows is refused before anything is read or
	// written.
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if operation == "" && o.table() {
			return nil
		}
		if _, err := o.flags.ToPrinter(); err != nil {
			return usageError(cmd, "%v", err)
		}
		return nil
	}
	return o
}

// table tells whether the default table is asked for (no -o).
func (o *output) table() bool {
	return o.flags.OutputFormat == nil || *o.flags.OutputFormat == "" || *o.flags.OutputFormat == "wide"
}

// wide tells whether -o wide is asked for.
func (o *output) wide() bool {
	return o.flags.OutputFormat != nil && *o.flags.OutputFormat == "wide"
}

// print writes obj (an object or a list) with the printer -o asks for; the
// name printer when -o is not given.
func (o *output) print(obj runtime.Object, w io.Writer) error {
	if err := setKinds(obj); err != nil {
		return err
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	if o.flags.OutputFormat != nil && *o.flags.OutputFormat == "name" && meta.IsListType(obj) {
		// The name printer takes the items one by one.
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := p.PrintObj(item, w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(obj, w)
}

// setKinds fills the apiVersion and kind of obj and, for a list, of each
// item, as kubectl prints them (a typed client leaves them empty).
func setKinds(obj runtime.Object) error {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := setKinds(item); err != nil {
				return err
			}
		}
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// table is a kubectl table: upper-case headers, columns aligned with
// three spaces between them, and the namespace first with -A.
type table struct {
	headers   []string
	rows      [][]string
	namespace bool
}

// newTable starts a table with the given column headers; withNamespace
// puts a NAMESPACE column first.
func newTable(withNamespace bool, headers ...string) *table {
	if withNamespace {
		headers = append([]string{"NAMESPACE"}, headers...)
	}
	return &table{headers: headers, namespace: withNamespace}
}

// add appends a row: the object's namespace (used with -A), then one cell
// per header.
func (t *table) add(namespace string, cells ...string) {
	if t.namespace {
		cells = append([]string{namespace}, cells...)
	}
	for i, c := range cells {
		cells[i] = cell(c)
	}
	t.rows = append(t.rows, cells)
}

// write prints the table, or, when it has no rows, kubectl's "No
// resources found" line on errOut.
func (t *table) write(out, errOut io.Writer, kind, namespace string) error {
	if len(t.rows) == 0 {
		if namespace == "" {
			_, err := fmt.Fprintf(errOut, "No %s found.\n", kind)
			return err
		}
		_, err := fmt.Fprintf(errOut, "No %s found in %s namespace.\n", kind, namespace)
		return err
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, strings.Join(t.headers, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// maxCell is the most runes a cell shows; longer text (an error message,
// a tenant's label) ends with "...".
const maxCell = 80

// cell makes text fit a table cell: one line, no control characters (the
// text may come from a tenant or a worker), at most maxCell runes, and
// "<none>" when empty.
func cell(s string) string {
	if s == "" {
		return "<none>"
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-3]) + "..."
	}
	return s
}

// since is how long before now t was, as kubectl's AGE column shows it.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
