/* index — the SQLite store (source of truth: documents, pages, images, chunks, FTS5,
 * vectors) and the derived vector indexes (FAISS HNSW for text, LSH for images).
 * Other modules include this header only. */
#ifndef MMRAG_INDEX_H
#define MMRAG_INDEX_H
#include "index/store.h"
#include "index/vindex.h"
#endif
