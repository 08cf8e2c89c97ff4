/* api/core/isolate.c — the parent side of isolated ingest: start the child with its limits,
 * read and check its records within the deadline, reap it and name the reason it failed.
 *
 * Design notes:
 *  1. Everything between fork() and exec() is async-signal-safe (dup, dup2, open,
 *     close_range, setrlimit, prctl, execve): the parent has other threads, whose locks
 *     the child must never need. argv and envp are built before fork().
 *     The exec path uses vfork(), which runs no pthread_atfork handlers: OpenBLAS has one
 *     that stops its thread pool, and two threads forking at once deadlock in it (seen:
 *     the server hung with two uploads ingesting together, and never shut down). The vfork
 *     child shares our memory until execve, so it makes system calls only, with all
 *     signals blocked until their handlers are reset, as glibc's posix_spawn does.
 *     Fork-only children (no exec) still need fork(): kern_fork() waits for running BLAS
 *     calls and keeps two forks apart.
 *  2. Every descriptor the parent makes is O_CLOEXEC, and the child closes all but 0..3
 *     anyway, so no database file, socket or other child's pipe leaks into it.
 *  3. The parent polls the data pipe and the stderr pipe together (a chatty child must not
 *     block on a full stderr pipe), a quarter second at a time, checking the deadline and
 *     the caller's abort callback between waits.
 *  4. A failure is named from the wait status, the child's CPU time and peak memory
 *     (wait4) and the last line it wrote to stderr: timeout (we killed it), cpu (SIGXCPU,
 *     or SIGKILL at the hard CPU limit), memory (an allocation failure message or a peak
 *     near the limit, or a SIGKILL we did not send), crashed (any other signal),
 *     protocol (anything else).
 *  5. Memory input is spooled to a temporary file that the child reads; the file is
 *     unlinked when the handle is freed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "api/core/isolate.h"
#include "api/core/isolate_wire.h"
#include "kernels/kernels.h"

extern char **environ;

#if defined(__SANITIZE_ADDRESS__)
#define ISOLATE_ASAN 1    /* ASan reserves terabytes of address space: no RLIMIT_AS */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ISOLATE_ASAN 1
#endif
#endif

struct isolate_doc {
    pid_t pid;
    int fd, efd;                /* data and stderr read ends (-1 once closed) */
    double t0, deadline;        /* monotonic seconds; deadline 0 = none */
    isolate_limits lim;
    isolate_abort_cb cb;
    void *user;
    uint8_t *buf;               /* unread bytes from fd */
    size_t len, cap;
    char etail[1024];           /* the last bytes of the child's stderr */
    size_t elen;
    int32_t pages;
    char title[WIRE_MAX_TITLE + 1];
    wire_expect ex;
    char name[1024];            /* for messages */
    char tmp[4096];             /* spooled memory input, unlinked on free */
    int reaped, wstatus, killed_timeout;
    struct rusage ru;
};

void isolate_limits_default(isolate_limits *l) {
    memset(l, 0, sizeof *l);
    l->enabled = 1;
    l->timeout_s = 600;
    l->mem_mb = 4096;
    l->max_files = 256;
}

const char *isolate_status_name(int st) {
    switch (st) {
    case ISOLATE_CRASHED: return "crashed";
    case ISOLATE_TIMEOUT: return "timeout";
    case ISOLATE_MEMORY: return "memory";
    case ISOLATE_CPU: return "cpu";
    case ISOLATE_PROTOCOL: return "protocol";
    case ISOLATE_SPAWN: return "spawn";
    case ISOLATE_ABORTED: return "aborted";
    default: return "";
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- starting the child ----------------------------------------------------------------- */
typedef struct { char *v[24]; char num[4][16]; int n; } argv_buf;

static void add_arg(argv_buf *a, const char *s) {
    if (a->n < (int)(sizeof a->v / sizeof a->v[0]) - 1) a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
}

static void add_num(argv_buf *a, int slot, const char *opt, int v) {
    snprintf(a->num[slot], sizeof a->num[slot], "%d", v);
    add_arg(a, opt);
    add_arg(a, a->num[slot]);
}

static void build_argv(argv_buf *a, const isolate_doc *d, const char *path,
                       const ingest_options *o) {
    a->n = 0;
    add_arg(a, d->lim.worker_exe);
    add_arg(a, "ingest-worker");
    if (d->tmp[0]) { add_arg(a, "--name"); add_arg(a, d->name); }
    if (!o->ocr) add_arg(a, "--no-ocr");
    if (!o->strip_furniture) add_arg(a, "--keep-furniture");
    add_num(a, 0, "--dpi", o->render_dpi);
    add_num(a, 1, "--chunk", o->chunk_tokens);
    add_num(a, 2, "--overlap", o->overlap_tokens);
    if (o->tessdata) { add_arg(a, "--tessdata"); add_arg(a, o->tessdata); }
    add_arg(a, "--");
    add_arg(a, path);
}

/* The environment for an exec'd child: ours, plus (ASan builds only) an RSS cap that
 * stands in for RLIMIT_AS. NULL = use environ as it is. */
static char **build_envp(const isolate_limits *l, char *asan_opt, size_t n) {
#ifdef ISOLATE_ASAN
    if (l->mem_mb <= 0) return NULL;
    size_t count = 0;
    while (environ[count]) count++;
    char **env = calloc(count + 2, sizeof *env);
    if (!env) return NULL;
    const char *old = getenv("ASAN_OPTIONS");
    snprintf(asan_opt, n, "ASAN_OPTIONS=%s%shard_rss_limit_mb=%d", old ? old : "",
             old && *old ? ":" : "", l->mem_mb);
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], "ASAN_OPTIONS=", 13)) env[k++] = environ[i];
    env[k++] = asan_opt;
    env[k] = NULL;
    return env;
#else
    (void)l; (void)asan_opt; (void)n;
    return NULL;
#endif
}

static void set_limit(int res, rlim_t soft, rlim_t hard) {
    struct rlimit r = {soft, hard};
    setrlimit(res, &r);
}

/* In the child, before exec or the in-process parse: async-signal-safe calls only. */
static void child_setup(pid_t parent, int wfd, int efd, const isolate_limits *l, int cpu_s) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    /* Its own process group: a terminal's Ctrl-C goes to the parent, which aborts the
     * child itself. Signals as on a fresh start (the server blocks SIGINT/SIGTERM and
     * ignores SIGPIPE; a mask survives exec). A vfork child arrives with every signal
     * blocked; a handler of the parent must not run in it (shared memory), so handlers
     * go back to the default before the mask is cleared. */
    setpgid(0, 0);
    if (l->worker_exe) {
        for (int sig = 1; sig < NSIG; sig++) {
            struct sigaction cur;
            if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &cur)) continue;
            if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_IGN || cur.sa_handler == SIG_DFL))
                continue;
            struct sigaction dfl0;
            memset(&dfl0, 0, sizeof dfl0);
            dfl0.sa_handler = SIG_DFL;
            sigaction(sig, &dfl0, NULL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL);
    int w = fcntl(wfd, F_DUPFD, 10), e = fcntl(efd, F_DUPFD, 10);
    int null = open("/dev/null", O_RDWR);
    if (w < 0 || e < 0 || null < 0) _exit(127);
    if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(e, 2) < 0 || dup2(w, 3) < 0) _exit(127);
    close_range(4, ~0u, 0);
    set_limit(RLIMIT_CORE, 0, 0);
    if (l->max_files > 0) set_limit(RLIMIT_NOFILE, (rlim_t)l->max_files, (rlim_t)l->max_files);
    if (cpu_s > 0) set_limit(RLIMIT_CPU, (rlim_t)cpu_s, (rlim_t)cpu_s + 2);
#ifndef ISOLATE_ASAN
    if (l->mem_mb > 0) set_limit(RLIMIT_AS, (rlim_t)l->mem_mb << 20, (rlim_t)l->mem_mb << 20);
#endif
}

/* Default: a quarter above the wall clock, so that a stalled single-threaded parser is
 * reported as a timeout (the two limits at one value raced); the CPU limit stays the
 * backstop for parsers whose threads burn CPU faster than the clock runs. */
static int cpu_limit(const isolate_limits *l) {
    if (l->cpu_s > 0) return l->cpu_s;
    return l->timeout_s > 0 ? l->timeout_s + l->timeout_s / 4 + 1 : 0;
}

/* fork + exec without atfork handlers (design note 1). The child never returns here. */
static pid_t start_exec(isolate_doc *d, argv_buf *a, char **envp, pid_t parent, int wfd,
                        int efd, int cpu) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = vfork();
    if (pid == 0) {
        child_setup(parent, wfd, efd, &d->lim, cpu);
        execve(d->lim.worker_exe, a->v, envp ? envp : environ);
        _exit(127);
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}

static pid_t start_fork(isolate_doc *d, const char *path, const ingest_options *o,
                        pid_t parent, int wfd, int efd, int cpu) {
    fflush(NULL);   /* a fork-only child must not write our buffered output twice */
    pid_t pid = kern_fork();   /* not under another thread's sgemm (design note 1) */
    if (pid == 0) {
        child_setup(parent, wfd, efd, &d->lim, cpu);
        _exit(isolate_child_run(3, path, d->tmp[0] ? d->name : NULL, o));
    }
    return pid;
}

static int spawn(isolate_doc *d, const char *path, const ingest_options *o, char *err,
                 size_t errlen) {
    int dp[2], ep[2];
    if (pipe2(dp, O_CLOEXEC)) goto fail_pipe;
    if (pipe2(ep, O_CLOEXEC)) { close(dp[0]); close(dp[1]); goto fail_pipe; }
    argv_buf a;
    char asan_opt[1024];
    char **envp = NULL;
    if (d->lim.worker_exe) {
        build_argv(&a, d, path, o);
        envp = build_envp(&d->lim, asan_opt, sizeof asan_opt);
    }
    pid_t parent = getpid();
    int cpu = cpu_limit(&d->lim);
    if (d->lim.worker_exe) {
        d->pid = start_exec(d, &a, envp, parent, dp[1], ep[1], cpu);
    } else {
        d->pid = start_fork(d, path, o, parent, dp[1], ep[1], cpu);
    }
    free(envp);
    close(dp[1]);
    close(ep[1]);
    if (d->pid < 0) {
        close(dp[0]);
        close(ep[0]);
        snprintf(err, errlen, "%s: cannot start the ingest worker: %s", d->name, strerror(errno));
        return -1;
    }
    d->fd = dp[0];
    d->efd = ep[0];
    fcntl(d->fd, F_SETFL, O_NONBLOCK);
    fcntl(d->efd, F_SETFL, O_NONBLOCK);
    return 0;
fail_pipe:
    snprintf(err, errlen, "%s: cannot start the ingest worker: %s", d->name, strerror(errno));
    return -1;
}

/* ---- reaping and naming the failure ------------------------------------------------------ */
static void reap(isolate_doc *d, int kill_first) {
    if (d->pid <= 0 || d->reaped) return;
    if (kill_first) kill(d->pid, SIGKILL);
    /* A child that closed its pipe gets two seconds to exit before it is killed. */
    for (int i = 0; !kill_first && i < 200; i++) {
        pid_t r = wait4(d->pid, &d->wstatus, WNOHANG, &d->ru);
        if (r == d->pid) { d->reaped = 1; return; }
        if (r < 0 && errno != EINTR) { d->reaped = 1; return; }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!kill_first) kill(d->pid, SIGKILL);
    while (wait4(d->pid, &d->wstatus, 0, &d->ru) < 0 && errno == EINTR) {}
    d->reaped = 1;
}

/* The line of the child's stderr that explains most, printable ASCII only, into out: a
 * sanitizer's SUMMARY (or ERROR) line when there is one, else the last non-empty line. */
static void last_line(const isolate_doc *d, char *out, size_t n) {
    out[0] = 0;
    size_t end = d->elen, start;
    const char *sum = memmem(d->etail, d->elen, "SUMMARY: ", 9);
    if (!sum) sum = memmem(d->etail, d->elen, "ERROR: AddressSanitizer", 23);
    if (sum) {
        start = (size_t)(sum - d->etail);
        end = start;
        while (end < d->elen && d->etail[end] != '\n') end++;
    } else {
        while (end && (d->etail[end - 1] == '\n' || d->etail[end - 1] == '\r')) end--;
        start = end;
        while (start && d->etail[start - 1] != '\n') start--;
    }
    size_t k = 0;
    for (size_t i = start; i < end && k + 1 < n && k < 200; i++) {
        unsigned char ch = (unsigned char)d->etail[i];
        out[k++] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    out[k] = 0;
}

/* A SIGKILL nobody here sent comes from the kernel's out-of-memory killer, or from an
 * exec that could not map the binary under the address-space limit. */
static int mem_hint(const isolate_doc *d, const char *line) {
    if (strcasestr(line, "memory") || strcasestr(line, "alloc") || strcasestr(line, "rss limit"))
        return 1;
    if (WIFSIGNALED(d->wstatus) && WTERMSIG(d->wstatus) == SIGKILL) return 1;
    return d->lim.mem_mb > 0 && d->ru.ru_maxrss >= (long)d->lim.mem_mb * 1024 * 9 / 10;
}

/* Name why the child stopped early; returns the isolate_status, message in err. */
static int classify(isolate_doc *d, char *err, size_t errlen) {
    char line[256], extra[300] = "";
    last_line(d, line, sizeof line);
    if (line[0]) snprintf(extra, sizeof extra, ": %s", line);
    double cpu = d->ru.ru_utime.tv_sec + d->ru.ru_stime.tv_sec +
                 (d->ru.ru_utime.tv_usec + d->ru.ru_stime.tv_usec) * 1e-6;
    int sig = WIFSIGNALED(d->wstatus) ? WTERMSIG(d->wstatus) : 0;
    int lim_cpu = cpu_limit(&d->lim);
    if (d->killed_timeout) {
        snprintf(err, errlen, "%s: parsing timed out after %d s (worker killed); nothing stored",
                 d->name, d->lim.timeout_s);
        return ISOLATE_TIMEOUT;
    }
    if (sig == SIGXCPU || (sig == SIGKILL && lim_cpu > 0 && cpu >= lim_cpu - 0.5)) {
        snprintf(err, errlen, "%s: parsing used its CPU limit of %d s (worker killed); "
                 "nothing stored", d->name, lim_cpu);
        return ISOLATE_CPU;
    }
    if ((sig || (WIFEXITED(d->wstatus) && WEXITSTATUS(d->wstatus))) && mem_hint(d, line)) {
        char lim[48] = "";
        if (d->lim.mem_mb > 0) snprintf(lim, sizeof lim, " (limit %d MiB)", d->lim.mem_mb);
        snprintf(err, errlen, "%s: parser ran out of memory%s; nothing stored%s", d->name, lim,
                 extra);
        return ISOLATE_MEMORY;
    }
    if (!sig && WIFEXITED(d->wstatus) && WEXITSTATUS(d->wstatus) &&
        memmem(d->etail, d->elen, "Sanitizer", 9)) {   /* ASan/UBSan builds report, then exit */
        snprintf(err, errlen, "%s: parser crashed (sanitizer report); nothing stored%s", d->name,
                 extra);
        return ISOLATE_CRASHED;
    }
    if (sig) {
        const char *abbrev = sigabbrev_np(sig);
        snprintf(err, errlen, "%s: parser crashed (SIG%s); nothing stored%s", d->name,
                 abbrev ? abbrev : "?", extra);
        return ISOLATE_CRASHED;
    }
    snprintf(err, errlen, "%s: ingest worker exited with status %d before finishing; nothing "
             "stored%s", d->name, WIFEXITED(d->wstatus) ? WEXITSTATUS(d->wstatus) : -1, extra);
    return ISOLATE_PROTOCOL;
}

static int protocol_error(isolate_doc *d, const char *why, char *err, size_t errlen) {
    reap(d, 1);
    snprintf(err, errlen, "%s: ingest worker sent bad data (%s); nothing stored", d->name, why);
    return ISOLATE_PROTOCOL;
}

/* ---- reading records -------------------------------------------------------------------- */
static void drain_stderr(isolate_doc *d) {
    char tmp[4096];
    for (;;) {
        ssize_t n = read(d->efd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) { close(d->efd); d->efd = -1; }
            return;
        }
        size_t k = (size_t)n;
        if (k >= sizeof d->etail) {
            memcpy(d->etail, tmp + k - sizeof d->etail, sizeof d->etail);
            d->elen = sizeof d->etail;
        } else {
            size_t keep = d->elen + k > sizeof d->etail ? sizeof d->etail - k : d->elen;
            memmove(d->etail, d->etail + d->elen - keep, keep);
            memcpy(d->etail + keep, tmp, k);
            d->elen = keep + k;
        }
    }
}

/* Read what the data pipe has. 1 = got bytes, 0 = end of stream, -1 = error. */
static int read_data(isolate_doc *d, size_t want) {
    if (d->cap - d->len < 65536 || d->cap < want) {
        size_t nc = d->cap ? d->cap : 65536;
        while (nc < want || nc - d->len < 65536) nc *= 2;
        uint8_t *nb = realloc(d->buf, nc);
        if (!nb) return -1;
        d->buf = nb;
        d->cap = nc;
    }
    ssize_t n = read(d->fd, d->buf + d->len, d->cap - d->len);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : -1;
    if (n == 0) return 0;
    d->len += (size_t)n;
    return 1;
}

/* Wait for one whole record; on success type, payload and plen describe it (payload points
 * into d->buf until consume()). Returns 0 or an isolate_status (child reaped). */
static int next_record(isolate_doc *d, uint32_t *type, const uint8_t **payload, uint32_t *plen,
                       char *err, size_t errlen) {
    for (;;) {
        if (d->len >= 8) {
            uint32_t n;
            memcpy(type, d->buf, 4);
            memcpy(&n, d->buf + 4, 4);
            if (n > WIRE_MAX_RECORD) return protocol_error(d, "record too large", err, errlen);
            if (d->len >= 8 + (size_t)n) { *payload = d->buf + 8; *plen = n; return 0; }
        }
        if (d->cb && d->cb(d->user)) {
            reap(d, 1);
            snprintf(err, errlen, "%s: aborted", d->name);
            return ISOLATE_ABORTED;
        }
        double now = now_s();
        if (d->deadline > 0 && now >= d->deadline) {
            d->killed_timeout = 1;
            reap(d, 1);
            return classify(d, err, errlen);
        }
        int ms = 250;
        if (d->deadline > 0 && (d->deadline - now) * 1000 < ms) ms = (int)((d->deadline - now) * 1000) + 1;
        struct pollfd p[2] = {{d->fd, POLLIN, 0}, {d->efd, POLLIN, 0}};
        int np = poll(p, d->efd >= 0 ? 2 : 1, ms);
        if (np < 0 && errno != EINTR) return protocol_error(d, "poll failed", err, errlen);
        if (np <= 0) continue;
        if (d->efd >= 0 && p[1].revents) drain_stderr(d);
        if (!p[0].revents) continue;
        uint32_t plen = 0;
        if (d->len >= 8) memcpy(&plen, d->buf + 4, 4);
        size_t want = d->len >= 8 ? 8 + (size_t)plen : 8;
        int r = read_data(d, want);
        if (r < 0) return protocol_error(d, "cannot read the pipe", err, errlen);
        if (r == 0) {   /* the child closed its end: it is gone or going */
            if (d->efd >= 0) drain_stderr(d);
            reap(d, 0);
            if (d->efd >= 0) drain_stderr(d);
            return classify(d, err, errlen);
        }
    }
}

static void consume(isolate_doc *d, uint32_t plen) {
    size_t n = 8 + (size_t)plen;
    memmove(d->buf, d->buf + n, d->len - n);
    d->len -= n;
}

/* A FAIL record: the child's own verdict on the PDF (not a crash). Returns its
 * ingest_status, or INGEST_ERR_ARG with *iso_rc set when the record is malformed. */
static int child_failed(isolate_doc *d, const uint8_t *p, uint32_t n, int *iso_rc, char *err,
                        size_t errlen) {
    wire_cur c = {p, n, 0};
    int32_t st = wire_get_i32(&c);
    char *msg = wire_get_str(&c, 1024);
    if (c.bad || c.left || st >= 0 || st < INGEST_ERR_ARG) {
        free(msg);
        *iso_rc = protocol_error(d, "malformed failure record", err, errlen);
        return INGEST_ERR_ARG;
    }
    for (char *q = msg; *q; q++)   /* no control characters on anyone's terminal */
        if ((unsigned char)*q < 32 || *q == 127) *q = '?';
    snprintf(err, errlen, "%s", msg);
    free(msg);
    reap(d, 0);
    return st;
}

/* Read a record that must be `want`. Returns 0; a FAIL in its place returns its
 * ingest_status; any other outcome returns INGEST_ERR_ARG with *iso_rc set. */
static int expect(isolate_doc *d, uint32_t want, const uint8_t **p, uint32_t *n, int *iso_rc,
                  char *err, size_t errlen) {
    uint32_t type = 0;
    int rc = next_record(d, &type, p, n, err, errlen);
    if (rc) { *iso_rc = rc; return INGEST_ERR_ARG; }
    if (type == want) return 0;
    if (type == WIRE_FAIL) return child_failed(d, *p, *n, iso_rc, err, errlen);
    char why[64];
    snprintf(why, sizeof why, "record type %u where %u was due", type, want);
    *iso_rc = protocol_error(d, why, err, errlen);
    return INGEST_ERR_ARG;
}

/* ---- the handle ------------------------------------------------------------------------- */
static int spool_memory(isolate_doc *d, const void *data, size_t len, char *err, size_t errlen) {
    const char *dir = getenv("TMPDIR");
    snprintf(d->tmp, sizeof d->tmp, "%s/mmrag-ingest-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkostemp(d->tmp, O_CLOEXEC);
    if (fd < 0) goto fail;
    const uint8_t *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { close(fd); goto fail; }
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) == 0) return 0;
fail:
    snprintf(err, errlen, "%s: cannot spool the PDF for the ingest worker: %s", d->name,
             strerror(errno));
    if (fd >= 0 || d->tmp[0]) unlink(d->tmp);
    d->tmp[0] = 0;
    return -1;
}

static int read_hello_doc(isolate_doc *d, int *iso_rc, char *err, size_t errlen) {
    const uint8_t *p;
    uint32_t n;
    int rc = expect(d, WIRE_HELLO, &p, &n, iso_rc, err, errlen);
    if (rc) return rc;
    wire_cur c = {p, n, 0};
    uint32_t magic = wire_get_u32(&c), version = wire_get_u32(&c);
    if (c.bad || c.left || magic != WIRE_MAGIC || version != WIRE_VERSION) {
        *iso_rc = protocol_error(d, "bad hello", err, errlen);
        return INGEST_ERR_ARG;
    }
    consume(d, n);
    if ((rc = expect(d, WIRE_DOC, &p, &n, iso_rc, err, errlen))) return rc;
    c = (wire_cur){p, n, 0};
    d->pages = wire_get_i32(&c);
    char *title = wire_get_str(&c, WIRE_MAX_TITLE);
    if (c.bad || c.left || d->pages < 1 || d->pages > 10000000) {
        free(title);
        *iso_rc = protocol_error(d, "bad document record", err, errlen);
        return INGEST_ERR_ARG;
    }
    snprintf(d->title, sizeof d->title, "%s", title);
    free(title);
    consume(d, n);
    return 0;
}

int isolate_doc_open(const char *path, const void *data, size_t len, const char *name,
                     const ingest_options *o, const isolate_limits *l, isolate_abort_cb cb,
                     void *user, isolate_doc **out, int *iso_rc, char *err, size_t errlen) {
    *out = NULL;
    *iso_rc = 0;
    ingest_options def;
    if (!o) { ingest_options_default(&def); o = &def; }
    isolate_doc *d = calloc(1, sizeof *d);
    if (!d) { snprintf(err, errlen, "out of memory"); return INGEST_ERR_NOMEM; }
    d->fd = d->efd = -1;
    d->lim = *l;
    d->cb = cb;
    d->user = user;
    d->ex = (wire_expect){1, 0, 0};
    snprintf(d->name, sizeof d->name, "%s", name ? name : path ? path : "(memory)");
    if (!path && spool_memory(d, data, len, err, errlen)) {
        isolate_doc_free(d);
        *iso_rc = ISOLATE_SPAWN;
        return INGEST_ERR_ARG;
    }
    if (spawn(d, path ? path : d->tmp, o, err, errlen)) {
        isolate_doc_free(d);
        *iso_rc = ISOLATE_SPAWN;
        return INGEST_ERR_ARG;
    }
    d->t0 = now_s();
    d->deadline = l->timeout_s > 0 ? d->t0 + l->timeout_s : 0;
    int rc = read_hello_doc(d, iso_rc, err, errlen);
    if (rc) {
        isolate_doc_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int32_t isolate_doc_page_count(const isolate_doc *d) { return d ? d->pages : 0; }
const char *isolate_doc_title(const isolate_doc *d) { return d ? d->title : ""; }

int isolate_doc_page(isolate_doc *d, int32_t number, ingest_page **out, int *iso_rc,
                     char *err, size_t errlen) {
    *out = NULL;
    *iso_rc = 0;
    if (number != d->ex.page || number > d->pages) {
        snprintf(err, errlen, "%s: page %d asked out of order", d->name, number);
        return INGEST_ERR_ARG;
    }
    const uint8_t *p;
    uint32_t n;
    int rc = expect(d, WIRE_PAGE, &p, &n, iso_rc, err, errlen);
    if (rc) return rc;
    char why[200];
    if (wire_page_decode(p, n, &d->ex, out, why, sizeof why)) {
        *iso_rc = protocol_error(d, why, err, errlen);
        return INGEST_ERR_ARG;
    }
    consume(d, n);
    return 0;
}

int isolate_doc_finish(isolate_doc *d, int *iso_rc, char *err, size_t errlen) {
    *iso_rc = 0;
    const uint8_t *p;
    uint32_t n;
    int rc = expect(d, WIRE_END, &p, &n, iso_rc, err, errlen);
    if (rc) return rc;
    if (n || d->len != 8) {
        *iso_rc = protocol_error(d, "bytes after the end", err, errlen);
        return INGEST_ERR_ARG;
    }
    consume(d, n);
    reap(d, 0);
    if (!WIFEXITED(d->wstatus) || WEXITSTATUS(d->wstatus)) {
        *iso_rc = classify(d, err, errlen);
        return INGEST_ERR_ARG;
    }
    return 0;
}

void isolate_doc_free(isolate_doc *d) {
    if (!d) return;
    reap(d, 1);
    if (d->fd >= 0) close(d->fd);
    if (d->efd >= 0) close(d->efd);
    if (d->tmp[0]) unlink(d->tmp);
    free(d->buf);
    free(d);
}
