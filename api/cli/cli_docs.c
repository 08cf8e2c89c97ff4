/* api/cli/cli_docs.c — `mmrag ls`, `mmrag show DOC`, `mmrag rm DOC...`. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "api/cli/cli.h"

static const char ls_usage[] =
    "usage: mmrag ls [--db DIR] [--json]\n"
    "  List indexed documents: id, pages, chunks, images, sha256 prefix, title, path.\n";
static const char show_usage[] =
    "usage: mmrag show DOC [--page N] [--db DIR] [--json]\n"
    "  Show a document's chunks (kind, page, box [x0,y0,x1,y1] normalized, anchored image,\n"
    "  text) and images. DOC is an id, a sha256 prefix or the indexed path.\n";
static const char rm_usage[] =
    "usage: mmrag rm DOC... [--db DIR]\n"
    "  Delete documents (pages, images, chunks, vectors). DOC: id, sha256 prefix or path.\n";

/* Common option parsing: --db, --json, --page (when page != NULL), --help. */
static int parse(int argc, char **argv, const char *usage, const char **db, int *json, int *page) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"json", no_argument, 0, 'J'},
        {"page", required_argument, 0, 'p'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:p:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': *db = optarg; break;
        case 'J': if (!json) goto bad; *json = 1; break;
        case 'p':
            if (!page) goto bad;
            if (cli_parse_int("--page", optarg, 1, 1000000, page)) return CLI_USAGE;
            break;
        case 'h': fputs(usage, stdout); return -1;
        default: goto bad;
        }
    }
    return CLI_OK;
bad:
    fputs(usage, stderr);
    return CLI_USAGE;
}

int cli_ls(int argc, char **argv) {
    const char *db = NULL;
    int json = 0;
    int rc = parse(argc, argv, ls_usage, &db, &json, NULL);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if (optind < argc) return cli_usage_error(ls_usage, "ls: unexpected argument '%s'", argv[optind]);
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    store_doc_row *docs;
    int32_t n;
    if (store_doc_list(s, &docs, &n) != STORE_OK) {
        cli_err("%s", store_errmsg(s));
        store_close(s);
        return CLI_DBERR;
    }
    if (json) {
        json_t *arr = json_array();
        for (int32_t i = 0; i < n; i++) json_array_append_new(arr, cli_json_doc(&docs[i]));
        cli_json_print(json_pack("{s:o}", "documents", arr));
    } else {
        if (n) printf("%-5s %5s %6s %6s  %-12s  %-32s  %s\n", "ID", "PAGES", "CHUNKS", "IMAGES",
                      "SHA256", "TITLE", "PATH");
        for (int32_t i = 0; i < n; i++)
            printf("%-5lld %5d %6d %6d  %.12s  %-32.32s  %s\n", (long long)docs[i].id, docs[i].pages,
                   docs[i].n_chunks, docs[i].n_images, docs[i].sha256, docs[i].title, docs[i].path);
        printf("%d document%s\n", n, n == 1 ? "" : "s");
    }
    store_docs_free(docs, n);
    store_close(s);
    return CLI_OK;
}

static json_t *chunk_json(const store_chunk_row *c) {
    json_t *o = json_pack("{s:I,s:i,s:i,s:s,s:o,s:o,s:s}", "id", (json_int_t)c->id, "page", c->page,
                          "ord", c->ord, "kind", store_chunk_kind_name(c->kind), "box", cli_json_box(c->box),
                          "text", cli_json_str(c->text), "embedding_key", c->embedding_key);
    json_object_set_new(o, "image_id", c->image_id ? json_integer(c->image_id) : json_null());
    return o;
}

static json_t *image_json(const store_image_row *im) {
    json_t *o = json_pack("{s:I,s:i,s:i,s:s,s:o,s:i,s:i,s:I}", "id", (json_int_t)im->id, "page", im->page,
                          "index", im->idx, "kind", store_image_kind_name(im->kind), "box",
                          cli_json_box(im->box), "width_px", im->width_px, "height_px", im->height_px,
                          "preview_bytes", (json_int_t)im->png_len);
    char ph[17];
    snprintf(ph, sizeof ph, "%016llx", (unsigned long long)im->phash);
    json_object_set_new(o, "phash", json_string(ph));
    json_object_set_new(o, "caption_chunk", im->caption_chunk ? json_integer(im->caption_chunk) : json_null());
    return o;
}

/* Print text indented, wrapped at ~96 columns on spaces. */
static void print_wrapped(const char *t) {
    const int width = 96;
    while (*t) {
        while (*t == ' ' || *t == '\n') t++;
        int n = (int)strcspn(t, "\n");
        if (n > width) {
            int cut = width;
            while (cut > width / 2 && t[cut] != ' ') cut--;
            if (t[cut] != ' ') {   /* no space: cut on a UTF-8 boundary */
                cut = width;
                while (cut > 0 && ((unsigned char)t[cut] & 0xC0) == 0x80) cut--;
            }
            n = cut;
        }
        if (n > 0) printf("      %.*s\n", n, t);
        t += n;
    }
}

int cli_show(int argc, char **argv) {
    const char *db = NULL;
    int json = 0, page = 0;
    int rc = parse(argc, argv, show_usage, &db, &json, &page);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if (optind != argc - 1)
        return cli_usage_error(show_usage, "show: expected one DOC, got %d arguments", argc - optind);
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    store_doc_row d;
    store_chunk_row *ch = NULL;
    store_image_row *im = NULL;
    store_page_row *pg = NULL;
    int32_t nc = 0, ni = 0, np = 0;
    if (cli_doc_resolve(s, argv[optind], &d) != STORE_OK) { store_close(s); return CLI_FAIL; }
    rc = CLI_OK;
    if (page > d.pages) {
        cli_err("show: document %lld has %d pages, no page %d", (long long)d.id, d.pages, page);
        rc = CLI_FAIL;
        goto out;
    }
    if (store_chunks_get(s, d.id, page, &ch, &nc) || store_images_get(s, d.id, page, &im, &ni) ||
        store_pages_get(s, d.id, &pg, &np)) {
        cli_err("%s", store_errmsg(s));
        rc = CLI_DBERR;
        goto out;
    }
    if (json) {
        json_t *jc = json_array(), *ji = json_array(), *jp = json_array();
        for (int32_t i = 0; i < nc; i++) json_array_append_new(jc, chunk_json(&ch[i]));
        for (int32_t i = 0; i < ni; i++) json_array_append_new(ji, image_json(&im[i]));
        for (int32_t i = 0; i < np; i++)
            if (!page || pg[i].number == page)
                json_array_append_new(jp, json_pack("{s:i,s:f,s:f,s:b}", "number", pg[i].number,
                                                    "width_pt", (double)pg[i].width_pt, "height_pt",
                                                    (double)pg[i].height_pt, "ocr", pg[i].ocr));
        cli_json_print(json_pack("{s:o,s:o,s:o,s:o}", "document", cli_json_doc(&d), "pages", jp,
                                 "images", ji, "chunks", jc));
    } else {
        printf("doc %lld  %s\n  path   %s\n  sha256 %s\n  %d pages, %d chunks, %d images\n", (long long)d.id,
               d.title, d.path, d.sha256, d.pages, d.n_chunks, d.n_images);
        for (int32_t i = 0; i < ni; i++) {
            printf("image %lld  p.%d %-6s [%.3f,%.3f,%.3f,%.3f] %dx%d px", (long long)im[i].id, im[i].page,
                   store_image_kind_name(im[i].kind), im[i].box.x0, im[i].box.y0, im[i].box.x1, im[i].box.y1,
                   im[i].width_px, im[i].height_px);
            if (im[i].caption_chunk) printf("  caption chunk %lld", (long long)im[i].caption_chunk);
            putchar('\n');
        }
        for (int32_t i = 0; i < nc; i++) {
            printf("chunk %lld  p.%d %-7s [%.3f,%.3f,%.3f,%.3f]", (long long)ch[i].id, ch[i].page,
                   store_chunk_kind_name(ch[i].kind), ch[i].box.x0, ch[i].box.y0, ch[i].box.x1, ch[i].box.y1);
            if (ch[i].image_id) printf("  image %lld", (long long)ch[i].image_id);
            putchar('\n');
            print_wrapped(ch[i].text);
        }
    }
out:
    store_chunks_free(ch, nc);
    store_images_free(im, ni);
    free(pg);
    store_doc_row_clear(&d);
    store_close(s);
    return rc;
}

int cli_rm(int argc, char **argv) {
    const char *db = NULL;
    int rc = parse(argc, argv, rm_usage, &db, NULL, NULL);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if (optind >= argc) return cli_usage_error(rm_usage, "rm: no DOC given");
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    rc = CLI_OK;
    for (int i = optind; i < argc; i++) {
        store_doc_row d;
        if (cli_doc_resolve(s, argv[i], &d) != STORE_OK) { rc = CLI_FAIL; continue; }
        if (store_doc_delete(s, d.id) != STORE_OK) {
            cli_err("%s", store_errmsg(s));
            rc = CLI_DBERR;
        } else {
            printf("removed doc %lld  %s  %s\n", (long long)d.id, d.title, d.path);
        }
        store_doc_row_clear(&d);
    }
    store_close(s);
    return rc;
}
