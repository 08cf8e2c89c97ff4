/* api/cli/cli_index.c — `mmrag index PATH...`: collect PDFs from files and folders and index
 * them through the shared batch indexer (api/core/indexer.h: parallel parsing, embedding
 * beside it). Progress bar on a TTY, plain lines otherwise. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "api/cli/cli.h"
#include "api/core/indexer.h"
#include "vision/textenc.h"

static const char usage[] =
    "usage: mmrag index PATH... [--db DIR] [--jobs N] [--no-ocr] [--no-embed] [--json]\n"
    "                   [--timeout S] [--mem-limit MB] [--cpu-limit S] [--no-isolate]\n"
    "                   [--precision fp32|int8] [--no-wait]\n"
    "  Index PDF files and folders (recursive: *.pdf and files starting with %PDF).\n"
    "  Unchanged files are skipped; a changed file replaces its old version.\n"
    "  --db DIR     collection directory (default $MMRAG_DB or ./.mmrag), or a shared\n"
    "               collection postgres://USER@HOST:PORT/DB[?collection=NAME]: each file's\n"
    "               bytes and an ingest job go into the database and this command works\n"
    "               the jobs (with any `mmrag worker` that takes some of them)\n"
    "  --no-wait    shared collection: only queue the files for the workers\n"
    "  --jobs N     documents parsed in parallel (default: CPUs, at most 8)\n"
    "  --no-ocr     do not OCR pages without a text layer\n"
    "  --no-embed   skip the embedding pass (chunks are then embedded on first search)\n"
    "  --models DIR model directory (default $MMRAG_MODELS, ./models, or beside the binary)\n"
    "  --json       print a JSON report on stdout\n"
    "  --precision P  text encoder arithmetic, fp32 or int8 (default $MMRAG_PRECISION, else\n"
    "               int8 on CPUs with VNNI, fp32 elsewhere; int8: faster there, vectors\n"
    "               within cosine 0.995 of fp32's)\n"
    "  Each PDF is parsed in a child process: a crash, hang or out-of-memory there fails\n"
    "  that file only (reported with its reason) and stores nothing of it.\n"
    "  --timeout S    wall-clock limit per document (default 600; 0 = none)\n"
    "  --mem-limit MB address-space limit of the parser (default 4096; 0 = none)\n"
    "  --cpu-limit S  CPU seconds of the parser (default: 1.25 x the timeout + 1)\n"
    "  --no-isolate   parse in this process (no limits; a parser crash ends the run)\n"
    "  Exit: 0 all indexed, 1 some files failed, 2 usage, 3 database error.\n";

/* Ctrl-C: finish nothing half-way (open documents are aborted, committed ones stay),
 * print the summary and exit 130. A second Ctrl-C kills at once (the store stays whole). */
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) {
    interrupted = 1;
    signal(sig, SIG_DFL);
}

typedef struct { char **v; int n, cap; } strvec;

static int strvec_push(strvec *sv, const char *s) {
    if (sv->n == sv->cap) {
        int nc = sv->cap ? sv->cap * 2 : 32;
        char **p = realloc(sv->v, (size_t)nc * sizeof *p);
        if (!p) return -1;
        sv->v = p; sv->cap = nc;
    }
    if (!(sv->v[sv->n] = strdup(s))) return -1;
    sv->n++;
    return 0;
}

static void strvec_free(strvec *sv) {
    for (int i = 0; i < sv->n; i++) free(sv->v[i]);
    free(sv->v);
}

typedef struct {
    const char *db;
    int tty, json;
    double t0, last_draw, embed_t0;
    /* collection-phase failures, for the JSON report */
    strvec bad_paths, bad_msgs;
} ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- collecting files ------------------------------------------------------------- */
static int has_pdf_ext(const char *p) {
    size_t n = strlen(p);
    return n >= 4 && strcasecmp(p + n - 4, ".pdf") == 0;
}

/* 1 = starts with %PDF (within the first 1024 bytes, as readers allow), 0 = not, -1 = error */
static int has_pdf_magic(const char *p) {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n < 0) return -1;
    return memmem(buf, (size_t)n, "%PDF-", 5) != NULL;
}

static void bad_input(ctx *c, const char *path, const char *fmt, const char *detail) {
    char msg[600];
    snprintf(msg, sizeof msg, fmt, path, detail);
    cli_err("%s", msg);
    strvec_push(&c->bad_paths, path);
    strvec_push(&c->bad_msgs, msg);
}

static void walk(ctx *c, const char *dir, strvec *out, int depth) {
    if (depth > 64) { bad_input(c, dir, "%s: %s", "folders nested too deep"); return; }
    DIR *d = opendir(dir);
    if (!d) { bad_input(c, dir, "%s: cannot read folder: %s", strerror(errno)); return; }
    struct dirent *e;
    strvec names = {0};
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) strvec_push(&names, e->d_name);
    }
    closedir(d);
    for (int i = 0; i < names.n; i++) {
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, names.v[i]) >= (int)sizeof p) {
            bad_input(c, names.v[i], "%s: %s", "path too long");
            continue;
        }
        struct stat ls, st;
        if (lstat(p, &ls) != 0) { bad_input(c, p, "%s: %s", strerror(errno)); continue; }
        if (S_ISDIR(ls.st_mode)) { walk(c, p, out, depth + 1); continue; }  /* no symlinked dirs */
        if (stat(p, &st) != 0) {   /* e.g. a dangling symlink */
            if (S_ISLNK(ls.st_mode) && has_pdf_ext(p)) bad_input(c, p, "%s: broken link: %s", strerror(errno));
            continue;
        }
        if (!S_ISREG(st.st_mode)) continue;
        int magic = has_pdf_ext(p) ? 1 : has_pdf_magic(p);
        if (magic < 0) bad_input(c, p, "%s: cannot read: %s", strerror(errno));
        else if (magic) strvec_push(out, p);
    }
    strvec_free(&names);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- progress --------------------------------------------------------------------- */
/* "[#######.................]": done of total in 24 cells (all full when total is 0) */
static const char *bar_cells(char bar[32], int64_t done, int64_t total) {
    const int width = 24;
    int filled = total > 0 ? (int)(done * width / total) : width;
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    return bar;
}

/* One status line on stderr, redrawn in place (TTY only). */
static void draw_bar(ctx *c, const indexer_progress *p, const char *name, int force) {
    if (!c->tty) return;
    double t = now_s();
    if (!force && t - c->last_draw < 0.1) return;   /* at most 10 redraws a second */
    c->last_draw = t;
    char bar[32];
    bar_cells(bar, p->done, p->total);
    double el = now_s() - c->t0;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name ? name : "";
    fprintf(stderr, "\r\033[K[%s] %d/%d docs  %lld pages  %.1f pages/s  %.40s", bar, p->done,
            p->total, (long long)p->pages, el > 0 ? (double)p->pages / el : 0.0, base);
    fflush(stderr);
}

static void clear_bar(ctx *c) {
    if (c->tty) fputs("\r\033[K", stderr);
}

/* the indexer's callbacks (called under its lock, one at a time) */
static void on_page(void *user, const indexer_progress *p, const char *path) {
    draw_bar(user, p, path, 0);
}

static int on_stop(void *user) {
    (void)user;
    return interrupted;
}

static void on_note(void *user, const char *msg) {
    clear_bar(user);
    cli_err("note: %s", msg);
}

/* Report one finished document. */
static void on_doc(void *user, const indexer_doc *j, const indexer_progress *p) {
    ctx *c = user;
    clear_bar(c);
    const pipeline_result *r = &j->res;
    if (j->rc == PIPELINE_ABORTED) {
        /* interrupted: reported in the summary */
    } else if (j->rc < 0) {
        cli_err("%s", j->err);
    } else if (!c->json) {
        if (j->rc == INDEXER_QUEUED)
            printf("queued    job %-4lld %s\n", (long long)j->job_id, j->path);
        else if (j->rc == PIPELINE_EXISTS)
            printf("unchanged doc %-4lld %s\n", (long long)r->doc_id, j->path);
        else {
            printf("%s doc %-4lld %4d pages %5d chunks %4d images %7.2f s  %s", r->replaced_id ? "replaced " : "indexed  ",
                   (long long)r->doc_id, r->pages, r->chunks, r->images, r->seconds, j->path);
            if (r->replaced_id) printf("  (was doc %lld)", (long long)r->replaced_id);
            putchar('\n');
        }
        fflush(stdout);
    }
    draw_bar(c, p, NULL, 1);
}

/* embedding progress on a TTY once parsing ended: "[####....] embedding 1200/3401 chunks
 * 31.2/s"; Ctrl-C stops it (search embeds the rest later) */
static void on_embed(void *user, int64_t done, int64_t total) {
    ctx *c = user;
    if (!c->tty) return;
    if (c->embed_t0 == 0) c->embed_t0 = now_s();
    double el = now_s() - c->embed_t0;
    if (now_s() - c->last_draw >= 0.1 || done >= total) {
        c->last_draw = now_s();
        char bar[32];
        fprintf(stderr, "\r\033[K[%s] embedding %lld/%lld chunks  %.1f/s",
                bar_cells(bar, done, total), (long long)done,
                (long long)total, el > 0 ? (double)done / el : 0.0);
        fflush(stderr);
    }
}

static json_t *job_json(const indexer_doc *j) {
    static const char *const st[] = {"indexed", "unchanged"};
    const pipeline_result *r = &j->res;
    const char *status = j->rc == INDEXER_NOT_RUN || j->rc == PIPELINE_ABORTED ? "skipped" : j->rc < 0 ? "failed"
                       : (j->rc == PIPELINE_OK && r->replaced_id) ? "replaced" : st[j->rc];
    json_t *o = json_pack("{s:o,s:s}", "path", cli_json_str(j->path), "status", status);
    if (j->rc >= 0) {
        json_object_set_new(o, "doc_id", json_integer(r->doc_id));
        if (r->replaced_id) json_object_set_new(o, "replaced_id", json_integer(r->replaced_id));
    }
    if (j->rc == PIPELINE_OK) {
        json_object_set_new(o, "title", cli_json_str(r->title));
        json_object_set_new(o, "pages", json_integer(r->pages));
        json_object_set_new(o, "chunks", json_integer(r->chunks));
        json_object_set_new(o, "images", json_integer(r->images));
        json_object_set_new(o, "ocr_pages", json_integer(r->ocr_pages));
        json_object_set_new(o, "seconds", json_real(r->seconds));
    }
    if (r->isolate_rc && r->isolate_rc != ISOLATE_ABORTED)
        json_object_set_new(o, "failure", json_string(isolate_status_name(r->isolate_rc)));
    if (j->rc < 0 || j->rc == INDEXER_NOT_RUN)
        json_object_set_new(o, "error", cli_json_str(j->rc == PIPELINE_ABORTED || (j->rc == INDEXER_NOT_RUN && interrupted) ? "interrupted" : j->err));
    return o;
}

int cli_index(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"jobs", required_argument, 0, 'j'},
        {"json", no_argument, 0, 'J'}, {"no-ocr", no_argument, 0, 'O'},
        {"no-embed", no_argument, 0, 'E'}, {"models", required_argument, 0, 'm'},
        {"timeout", required_argument, 0, 'T'}, {"mem-limit", required_argument, 0, 'M'},
        {"cpu-limit", required_argument, 0, 'C'}, {"no-isolate", no_argument, 0, 'I'},
        {"precision", required_argument, 0, 'P'}, {"no-wait", no_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL;
    textenc_precision prec;
    isolate_limits lim;
    isolate_limits_default(&lim);
    lim.worker_exe = "/proc/self/exe";   /* this binary's ingest-worker command */
    int embed = 1, no_wait = 0;
    int jobs = 0, json = 0, ocr = 1, o;   /* jobs 0: the indexer's default */
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:j:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'j': if (cli_parse_int("--jobs", optarg, 1, 64, &jobs)) return CLI_USAGE; break;
        case 'J': json = 1; break;
        case 'O': ocr = 0; break;
        case 'E': embed = 0; break;
        case 'm': models = optarg; break;
        case 'T': if (cli_parse_int("--timeout", optarg, 0, 86400 * 7, &lim.timeout_s)) return CLI_USAGE; break;
        case 'M': if (cli_parse_int("--mem-limit", optarg, 0, 1 << 24, &lim.mem_mb)) return CLI_USAGE; break;
        case 'C': if (cli_parse_int("--cpu-limit", optarg, 0, 86400 * 7, &lim.cpu_s)) return CLI_USAGE; break;
        case 'I': lim.enabled = 0; break;
        case 'W': no_wait = 1; break;
        case 'P':
            if (textenc_precision_parse(optarg, &prec))
                return cli_usage_error(usage, "index: --precision must be fp32 or int8");
            /* the encoder reads it when embed_create loads it (one process, one encoder) */
            setenv("MMRAG_PRECISION", optarg, 1);
            break;
        case 'h':
            fputs(usage, stdout);
            printf("  Text encoder default on this CPU: %s\n", textenc_precision_auto() == TEXTENC_INT8 ? "int8" : "fp32");
            return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    strvec args = {0};
    for (int i = optind; i < argc; i++) strvec_push(&args, argv[i]);
    if (args.n == 0) { strvec_free(&args); return cli_usage_error(usage, "index: no PATH given"); }

    /* Tesseract's OpenMP would oversubscribe the cores with several OCR workers. */
    setenv("OMP_THREAD_LIMIT", "1", 0);
    ctx c = {.db = cli_db_dir(db), .json = json, .tty = isatty(2)};
    if (no_wait && !store_is_url(c.db))
        return cli_usage_error(usage, "index: --no-wait needs a shared collection (postgres://...)");
    indexer_opts io;
    indexer_opts_default(&io, c.db);
    io.models = models;
    io.pipeline.ingest.ocr = ocr;
    io.pipeline.isolate = lim;
    io.jobs = jobs;
    io.embed = embed;
    io.no_wait = no_wait;
    io.on_page = on_page;
    io.on_doc = on_doc;
    io.on_embed = on_embed;
    io.on_note = on_note;
    io.stop = on_stop;   /* Ctrl-C stops the embedding too */
    io.user = &c;

    strvec files = {0};
    for (int i = 0; i < args.n; i++) {
        struct stat st;
        const char *p = args.v[i];
        if (stat(p, &st) != 0) bad_input(&c, p, "%s: %s", strerror(errno));
        else if (S_ISDIR(st.st_mode)) walk(&c, p, &files, 0);
        else strvec_push(&files, p);   /* explicit files go to ingest, which names any problem */
    }
    strvec_free(&args);
    qsort(files.v, (size_t)files.n, sizeof *files.v, cmp_str);

    int rc = CLI_OK;
    indexer_doc *docs = calloc((size_t)(files.n ? files.n : 1), sizeof *docs);
    if (!docs) { cli_err("out of memory"); rc = CLI_DBERR; goto out; }
    for (int i = 0; i < files.n; i++) docs[i].path = files.v[i];
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    c.t0 = now_s();
    indexer_totals tot;
    char err[512];
    int irc = indexer_run(&io, docs, files.n, &tot, err, sizeof err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    clear_bar(&c);
    if (irc != 0) { cli_err("%s", err); rc = CLI_DBERR; goto out; }
    embed_counts emb = tot.embedded;
    double el = tot.seconds, emb_s = tot.embed_seconds;

    int n_ok = 0, n_same = 0, n_rep = 0, n_fail = c.bad_paths.n, n_skip = 0, dberr = 0, n_queued = 0;
    int64_t pages = 0;
    for (int i = 0; i < files.n; i++) {
        const indexer_doc *j = &docs[i];
        if (j->rc == PIPELINE_OK) { n_ok++; pages += j->res.pages; n_rep += j->res.replaced_id != 0; }
        else if (j->rc == PIPELINE_EXISTS) n_same++;
        else if (j->rc == INDEXER_QUEUED) n_queued++;
        else if (j->rc == INDEXER_NOT_RUN || j->rc == PIPELINE_ABORTED) n_skip++;
        else { n_fail++; dberr |= j->rc == PIPELINE_ERR_STORE; }
    }
    if (json) {
        json_t *jdocs = json_array();
        for (int i = 0; i < files.n; i++) json_array_append_new(jdocs, job_json(&docs[i]));
        for (int i = 0; i < c.bad_paths.n; i++)
            json_array_append_new(jdocs, json_pack("{s:o,s:s,s:o}", "path", cli_json_str(c.bad_paths.v[i]),
                                                  "status", "failed", "error", cli_json_str(c.bad_msgs.v[i])));
        cli_json_print(json_pack("{s:o,s:o,s:i,s:i,s:i,s:i,s:i,s:I,s:f,s:f,s:{s:I,s:I,s:I,s:f,s:I,s:I}}",
                                 "db", cli_json_str(c.db), "documents", jdocs, "indexed", n_ok,
                                 "replaced", n_rep, "unchanged", n_same, "failed", n_fail,
                                 "skipped", n_skip, "pages", (json_int_t)pages, "seconds", el,
                                 "pages_per_s", el > 0 ? (double)pages / el : 0.0, "embedded",
                                 "chunks", (json_int_t)emb.chunks, "images",
                                 (json_int_t)emb.images, "figures", (json_int_t)emb.figures,
                                 "seconds", emb_s, "texts_encoded", (json_int_t)emb.encoded,
                                 "texts_reused", (json_int_t)emb.reused));
    } else {
        if (n_queued) printf("%d queued for the workers (`mmrag worker --db ...`)\n", n_queued);
        printf("%d indexed, %d unchanged, %d failed%s; %lld pages in %.2f s (%.1f pages/s)\n", n_ok,
               n_same, n_fail, !n_skip ? "" : interrupted ? " (interrupted: others not indexed)"
                                                          : " (others skipped after a database error)",
               (long long)pages, el, el > 0 ? (double)pages / el : 0.0);
        if (emb.chunks || emb.images || emb.figures)
            printf("embedded %lld chunks, %lld images by their text and %lld by their pixels in "
                   "%.2f s (%lld texts encoded, %lld repeats reused)\n", (long long)emb.chunks,
                   (long long)emb.images, (long long)emb.figures, emb_s,
                   (long long)emb.encoded, (long long)emb.reused);
    }
    if (n_fail || n_skip) rc = dberr || n_skip ? CLI_DBERR : CLI_FAIL;
    if (interrupted) rc = 130;
    if (files.n == 0 && c.bad_paths.n == 0) cli_err("index: no PDF files found");
out:
    free(docs);
    strvec_free(&files);
    strvec_free(&c.bad_paths);
    strvec_free(&c.bad_msgs);
    return rc;
}
