/* engine/vpe_internal.h — private to engine/vpe*.c: the parsed description. */
#ifndef MMRAG_ENGINE_VPE_INTERNAL_H
#define MMRAG_ENGINE_VPE_INTERNAL_H
#include <stdint.h>

#define VPE_PHRASE 512

enum { VPE_REL_NONE = 0, VPE_REL_ABOVE, VPE_REL_BELOW, VPE_REL_LEFT, VPE_REL_RIGHT };

/* Kind sets are bit masks over vpe_kind (1u << kind). */
typedef struct {
    uint32_t kind_primary, kind_secondary;   /* 0/0: no kind word */
    int32_t label_num;          /* "figure 2" / "table 1": 2 / 1; 0 = none */
    int32_t label_table;        /* the label is "table N" (else figure) */
    int32_t page;               /* "on page N"; 0 = none */
    int32_t ordinal;            /* n-th (1-based), -1 = last, 0 = none */
    int32_t pos_v, pos_h;       /* -1 top/left, +1 bottom/right, 0 none */
    int32_t rel;                /* VPE_REL_* */
    int32_t rel_weak;           /* over/after/before: dropped if no anchor matches */
    uint32_t anchor_primary, anchor_secondary;
    int32_t anchor_label_num, anchor_label_table;
    char target[VPE_PHRASE];    /* text compared with region text */
    int32_t n_content;          /* content words in target */
    char target_words[VPE_PHRASE];  /* the content words alone (lexical overlap) */
    char all_words[VPE_PHRASE];
    char anchor[VPE_PHRASE];    /* anchor content words ("revenue") */
    int32_t anchor_n_content;
    char target_all[VPE_PHRASE];   /* target + anchor words: used when the relation drops */
    int32_t all_n_content;
} vpe_query;

/* Parse a description (UTF-8, any case). Never fails; unknown words are content. */
void vpe_query_parse(const char *desc, vpe_query *q);
/* Mask of kinds a kind noun asks for (primary / secondary); 0 if `w` is not one. */
int vpe_kind_word(const char *w, uint32_t *primary, uint32_t *secondary);
#endif
