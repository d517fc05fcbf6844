/*
 * The pod sandbox ("pause") process: holds the pod's namespaces, reaps zombies, exits on
 * SIGINT/SIGTERM. Built statically (gcc -static) into a FROM-scratch image by
 * hack/images/build.sh, because the upstream pause image cannot be fetched here; containerd's
 * CRI names it as sandbox_image (hack/k8s/localkube/realnode.py).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    if (getpid() != 1) {
        fprintf(stderr, "pause: warning: not pid 1\n");
    }
    for (;;) {
        pause();
    }
}
