package chaos

import (
	"fmt"
	"os"

	. "github.com/onsi/gomega"
)

func debugTasks(s *scenario) {
	runs := executions(s.dir)
	for _, t := range tasksIn(Default, s.ns) {
		if len(t.Status.Attempts) > 0 || len(runs[t.Name]) > 1 {
			fmt.Fprintf(os.Stderr, "DEBUG %s runs %v attempts %s\n", t.Name, runs[t.Name], describeAttempts(&t.Status))
		}
	}
}
