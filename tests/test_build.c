/* Build sanity: the FAISS C API is really linked (Debian's libfaiss.a lacks it) and
 * works end to end: factory → add → search. */
#include "test.h"
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/error_c.h>

TEST(faiss_factory_hnsw_add_search) {
    FaissIndex *idx = NULL;
    CHECK(faiss_index_factory(&idx, 8, "HNSW32,Flat", METRIC_INNER_PRODUCT) == 0);
    CHECK(idx != NULL);
    float xb[8 * 16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) xb[i * 8 + j] = (i == j % 16) ? 1.0f : 0.01f * (float)(i + j);
    CHECK(faiss_Index_add(idx, 16, xb) == 0);
    CHECK(faiss_Index_ntotal(idx) == 16);
    float dist[1];
    idx_t lab[1];
    CHECK(faiss_Index_search(idx, 1, xb + 3 * 8, 1, dist, lab) == 0);
    CHECK_MSG(lab[0] == 3, "nearest of row 3 is %ld", (long)lab[0]);
    faiss_Index_free(idx);
}

TEST(faiss_factory_bad_spec_is_error) {
    FaissIndex *idx = NULL;
    CHECK(faiss_index_factory(&idx, 8, "NoSuchIndex,Flat", METRIC_L2) != 0);
    const char *msg = faiss_get_last_error();
    CHECK(msg != NULL && strlen(msg) > 0);
}
