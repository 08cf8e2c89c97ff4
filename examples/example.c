/* examples/example.c — index PDFs, search, then ask with a streamed answer, through the
 * public API only (include/mmrag.h).
 *   cc example.c $(pkg-config --cflags --libs mmrag) -o example
 *   ./example DB_DIR "question" FILE.pdf...   */
#include <mmrag.h>
#include <stdio.h>

static int print_piece(void *user, const char *piece, size_t len) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0;                                   /* non-zero would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s DB_DIR QUESTION [FILE.pdf...]\n", argv[0]); return 2; }
    mmrag *h;
    char err[512];
    if (mmrag_open(argv[1], NULL, &h, err, sizeof err) != MMRAG_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        int64_t id;
        int rc = mmrag_index_file(h, argv[i], &id);
        if (rc == MMRAG_OK) printf("indexed %s as document %lld\n", argv[i], (long long)id);
        else fprintf(stderr, "index: %s (%s)\n", mmrag_errmsg(h), mmrag_strerror(rc));
    }
    mmrag_hit *hits;
    int32_t n;
    mmrag_search_opts so = {.k = 3};
    if (mmrag_search(h, argv[2], &so, &hits, &n) == MMRAG_OK) {
        for (int32_t i = 0; i < n; i++)
            printf("hit %d: doc %lld page %d box [%.2f %.2f %.2f %.2f] %.60s\n", i + 1,
                   (long long)hits[i].doc_id, hits[i].page, hits[i].box.x0, hits[i].box.y0,
                   hits[i].box.x1, hits[i].box.y1, hits[i].text);
        mmrag_hits_free(hits, n);
    }
    mmrag_ask_opts ao = {.k = 3, .max_tokens = 48, .on_token = print_piece};
    mmrag_answer a;
    int rc = mmrag_ask(h, argv[2], &ao, &a);
    if (rc == MMRAG_OK) {
        printf("\n");
        for (int32_t i = 0; i < a.n_citations; i++)
            printf("[%d] %s, page %d\n", i + 1, a.citations[i].title, a.citations[i].page);
        mmrag_answer_free(&a);
    } else {
        fprintf(stderr, "ask: %s\n", mmrag_errmsg(h));
    }
    mmrag_close(h);
    return rc == MMRAG_OK ? 0 : 1;
}
