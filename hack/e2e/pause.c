/* The sandbox (pause) process of the end-to-end tests: it holds the pod's
   namespaces, reaps orphaned children, and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	signal(SIGINT, on_term);
	signal(SIGTERM, on_term);
	signal(SIGCHLD, on_child);
	for (;;) {
		pause();
	}
	return 0;
}
