/* Private to vision/: the BERT WordPiece tokenizer used by the text encoder. */
#ifndef MMRAG_VISION_TEXTENC_INTERNAL_H
#define MMRAG_VISION_TEXTENC_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

typedef struct vision_wp vision_wp;

/* Load vocab.txt (id = line number). Needs [CLS], [SEP] and [UNK]. 0 or -1 + message. */
int vision_wp_load(const char *path, vision_wp **out, char *err, size_t errlen);
void vision_wp_free(vision_wp *v);
int32_t vision_wp_size(const vision_wp *v);
/* Id of the piece s[0..len) ("##" prepended when cont), or -1. */
int32_t vision_wp_find(const vision_wp *v, const char *s, size_t len, int cont);
/* [CLS] pieces... [SEP] for `text`, at most max_total (>= 2) ids in all: the pieces are
 * truncated to max_total - 2. Returns the number of ids written. Read-only on v. */
int32_t vision_wp_tokenize(const vision_wp *v, const char *text, int32_t *ids,
                           int32_t max_total);
#endif
