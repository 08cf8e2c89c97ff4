/* api/core/tools — OpenAI function calling: the tools' JSON schemas compiled into a byte
 * grammar, the model decoding under it, its calls parsed back (see tools.h).
 *
 * Design notes:
 * 1. The grammar is a flat program of nodes run by a tiny automaton whose state (tg_state,
 *    ~24 bytes) the engine copies per candidate token. Node kinds: CHOICE (one or more
 *    literal alternatives, each jumping to its own node; a plain literal is a choice of
 *    one), STR (the rest of a JSON string after its opening quote), NUM (a JSON number
 *    without exponent; integer-only when flagged), ARR (epsilon: reset an array's item
 *    counter) and END.
 * 2. No alternative of a choice may be a prefix of another, so a choice is decided the
 *    moment its last surviving alternative is complete (checked at compile time).
 * 3. A number ends at the first byte it cannot take; that byte is fed to the next node,
 *    which is always a literal (",", "}" or "]").
 * 4. Array separators are a choice of "," (allowed while items < max) and "]" (allowed
 *    once items >= min); the counter per array lives in the state (at most TG_ARRAYS).
 * 5. A turn calls each tool at most once (the state's `used` mask): a 135M model asked
 *    for two things otherwise repeats the first tool up to the call limit. */
#include "api/core/tools.h"
#include "api/core/answer_internal.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_ARRAYS 8
#define TG_MAX_NODES 2048
#define TG_STR_MAX 256
#define TG_DEPTH 6

enum { OP_CHOICE, OP_STR, OP_NUM, OP_ARR, OP_END };

typedef struct {
    uint8_t op;
    uint8_t integer;           /* NUM: no fraction */
    uint8_t once;              /* CHOICE of tool names: each alternative once per turn */
    int8_t arr;                /* CHOICE closing an array item: the array's counter, else -1 */
    uint8_t min, max;          /* that array's item bounds */
    uint16_t str_max;          /* STR: bytes */
    int32_t n_alt;             /* CHOICE */
    char **alt;
    uint16_t *target;
    uint16_t next;             /* STR, NUM, ARR */
} tg_node;

typedef struct {
    tg_node *nodes;
    int32_t n, cap;
    int32_t n_arrays;
} tg_prog;

typedef struct {
    uint16_t pc, pos;          /* node; bytes matched of a choice, or of a string */
    uint32_t alive;            /* choice alternatives still matching */
    uint32_t used;             /* tool names called this turn */
    uint8_t sub;               /* STR: 1 after a backslash; NUM: number substate */
    uint8_t utf8_left, lo, hi; /* STR: continuation bytes due and the next one's range */
    uint8_t count[TG_ARRAYS];
    uint8_t done;
} tg_state;

struct tools_set {
    int32_t n;
    char *name[TOOLS_MAX];
    char *desc[TOOLS_MAX];
    char *params[TOOLS_MAX];   /* the parameters schema as compact JSON, for the prompt */
    int choice;                /* tools_choice */
    int32_t named;             /* TOOLS_NAMED: the tool */
    tg_prog prog;
};

/* ---- the automaton ------------------------------------------------------------------------ */
static void enter(const tg_prog *g, tg_state *s, uint16_t pc) {
    for (;;) {
        const tg_node *n = &g->nodes[pc];
        s->pc = pc;
        s->pos = 0;
        s->sub = 0;
        s->utf8_left = 0;
        if (n->op == OP_ARR) { s->count[n->arr] = 0; pc = n->next; continue; }
        if (n->op == OP_END) { s->done = 1; return; }
        if (n->op == OP_CHOICE) {
            s->alive = 0;
            for (int32_t i = 0; i < n->n_alt; i++) {
                int ok = 1;
                /* an array's separator: alternative 0 continues, 1 closes */
                if (n->arr >= 0 && i == 0) ok = s->count[n->arr] + 1 < n->max;
                if (n->arr >= 0 && i == 1) ok = s->count[n->arr] + 1 >= n->min;
                if (n->once && (s->used >> i & 1)) ok = 0;
                if (ok) s->alive |= 1u << i;
            }
        }
        return;
    }
}

static void tg_init(const void *data, void *state) {
    tg_state *s = state;
    memset(s, 0, sizeof *s);
    enter(data, s, 0);
}

static int tg_done(const void *data, const void *state) {
    (void)data;
    return ((const tg_state *)state)->done;
}

static int feed_choice(const tg_prog *g, const tg_node *n, tg_state *s, unsigned char c) {
    uint32_t alive = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < n->n_alt; i++)
        if ((s->alive >> i & 1) && (unsigned char)n->alt[i][s->pos] == c) alive |= 1u << i, last = i;
    if (!alive) return -1;
    s->alive = alive;
    s->pos++;
    if ((alive & (alive - 1)) == 0 && n->alt[last][s->pos] == 0) {   /* decided and complete */
        if (n->arr >= 0 && last == 0) s->count[n->arr]++;
        if (n->once) s->used |= 1u << last;
        enter(g, s, n->target[last]);
    }
    return 0;
}

/* String bytes after the opening quote: UTF-8 checked (RFC 3629 ranges), simple escapes. */
static int feed_str(const tg_prog *g, const tg_node *n, tg_state *s, unsigned char c) {
    if (s->utf8_left) {
        if (c < s->lo || c > s->hi) return -1;
        s->lo = 0x80, s->hi = 0xBF;
        s->utf8_left--;
        return 0;
    }
    if (s->sub) {   /* after a backslash */
        if (!strchr("\"\\/nt", c) || !c) return -1;
        s->sub = 0;
        return 0;
    }
    if (c == '"') { enter(g, s, n->next); return 0; }
    if (c < 0x20 || ++s->pos > n->str_max) return -1;
    if (c == '\\') { s->sub = 1; return 0; }
    if (c < 0x80) return 0;
    s->lo = 0x80, s->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) s->utf8_left = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        s->utf8_left = 2;
        if (c == 0xE0) s->lo = 0xA0;
        if (c == 0xED) s->hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        s->utf8_left = 3;
        if (c == 0xF0) s->lo = 0x90;
        if (c == 0xF4) s->hi = 0x8F;
    } else return -1;
    return 0;
}

/* Number substates: 0 start, 1 after '-', 2 after a leading 0, 3 in digits, 4 after '.',
 * 5 in fraction digits. pos counts digits (15 at most: exact in a double). */
static int feed_num(const tg_prog *g, const tg_node *n, tg_state *s, unsigned char c) {
    int digit = c >= '0' && c <= '9';
    switch (s->sub) {
    case 0: case 1:
        if (c == '-' && s->sub == 0) { s->sub = 1; return 0; }
        if (!digit) return -1;
        s->sub = c == '0' ? 2 : 3;
        s->pos = 1;
        return 0;
    case 3:
        if (digit) return ++s->pos > 15 ? -1 : 0;
        /* fall through */
    case 2:
        if (c == '.' && !n->integer) { s->sub = 4; return 0; }
        break;
    case 4:
        if (!digit) return -1;
        s->sub = 5;
        return 0;
    case 5:
        if (digit) return ++s->pos > 15 ? -1 : 0;
        break;
    }
    enter(g, s, n->next);   /* the number is complete: c belongs to what follows */
    return s->done ? -1 : feed_choice(g, &g->nodes[s->pc], s, c);
}

static int tg_feed(const void *data, void *state, unsigned char c) {
    const tg_prog *g = data;
    tg_state *s = state;
    if (s->done) return -1;
    const tg_node *n = &g->nodes[s->pc];
    switch (n->op) {
    case OP_CHOICE: return feed_choice(g, n, s, c);
    case OP_STR: return feed_str(g, n, s, c);
    case OP_NUM: return feed_num(g, n, s, c);
    default: return -1;
    }
}

/* ---- compiling schemas into nodes --------------------------------------------------------- */
typedef struct {
    tg_prog *g;
    char *msg;
    size_t ml;
    const char *tool;
} tg_comp;

static int node_add(tg_comp *c, tg_node n) {
    tg_prog *g = c->g;
    if (g->n >= TG_MAX_NODES) { snprintf(c->msg, c->ml, "\"tools\": the schemas are too large"); return -1; }
    if (g->n == g->cap) {
        int32_t nc = g->cap ? g->cap * 2 : 64;
        tg_node *nn = realloc(g->nodes, (size_t)nc * sizeof *nn);
        if (!nn) { snprintf(c->msg, c->ml, "out of memory"); return -1; }
        g->nodes = nn;
        g->cap = nc;
    }
    g->nodes[g->n] = n;
    return g->n++;
}

/* A choice among alternatives, each continuing at the node after this one unless patched. */
static int choice_add(tg_comp *c, const char *const *alts, int32_t n_alt) {
    tg_node n = {.op = OP_CHOICE, .arr = -1, .n_alt = n_alt};
    n.alt = calloc((size_t)n_alt, sizeof *n.alt);
    n.target = calloc((size_t)n_alt, sizeof *n.target);
    int ok = n.alt && n.target;
    for (int32_t i = 0; ok && i < n_alt; i++) ok = (n.alt[i] = strdup(alts[i])) != NULL;
    for (int32_t i = 0; ok && i < n_alt; i++)
        for (int32_t k = 0; k < n_alt; k++)
            if (i != k && !strncmp(n.alt[i], n.alt[k], strlen(n.alt[i]))) {
                snprintf(c->msg, c->ml, "\"tools\": tool %s: alternatives %s and %s are ambiguous "
                         "(one is a prefix of the other)", c->tool, n.alt[i], n.alt[k]);
                ok = -1;
                break;
            }
    int id = ok == 1 ? node_add(c, n) : -1;
    if (id < 0) {
        if (ok == 0) snprintf(c->msg, c->ml, "out of memory");
        for (int32_t i = 0; n.alt && i < n_alt; i++) free(n.alt[i]);
        free(n.alt);
        free(n.target);
        return -1;
    }
    for (int32_t i = 0; i < n_alt; i++) c->g->nodes[id].target[i] = (uint16_t)(id + 1);
    return id;
}

static int lit_add(tg_comp *c, const char *s) { return choice_add(c, &s, 1); }

static int value_add(tg_comp *c, json_t *sch, int depth);

static const char *schema_type(json_t *sch) {
    json_t *t = json_object_get(sch, "type");
    if (json_is_string(t)) return json_string_value(t);
    if (json_is_array(t)) {
        size_t i;
        json_t *v;
        json_array_foreach(t, i, v) if (json_is_string(v) && strcmp(json_string_value(v), "null")) return json_string_value(v);
        return json_array_size(t) ? "null" : NULL;
    }
    if (json_object_get(sch, "properties")) return "object";
    return NULL;
}

static int enum_add(tg_comp *c, json_t *en) {
    size_t n = json_array_size(en);
    if (!n || n > 32) { snprintf(c->msg, c->ml, "\"tools\": tool %s: \"enum\" must hold 1..32 values", c->tool); return -1; }
    char *alts[32];
    size_t i;
    json_t *v;
    int rc = 0;
    json_array_foreach(en, i, v) alts[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    for (i = 0; i < n; i++) if (!alts[i]) rc = -1;
    if (rc) snprintf(c->msg, c->ml, "out of memory");
    else rc = choice_add(c, (const char *const *)alts, (int32_t)n) < 0 ? -1 : 0;
    for (i = 0; i < n; i++) free(alts[i]);
    return rc;
}

static int object_add(tg_comp *c, json_t *sch, int depth) {
    json_t *props = json_object_get(sch, "properties");
    if (props && !json_is_object(props)) {
        snprintf(c->msg, c->ml, "\"tools\": tool %s: \"properties\" must be an object", c->tool);
        return -1;
    }
    if (!props || !json_object_size(props)) return lit_add(c, "{}") < 0 ? -1 : 0;
    const char *key;
    json_t *v;
    int first = 1;
    json_object_foreach(props, key, v) {
        json_t *ks = json_string(key);
        char *kj = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        size_t L = kj ? strlen(kj) + 3 : 0;
        char *lit = kj ? malloc(L) : NULL;
        if (lit) snprintf(lit, L, "%s%s:", first ? "{" : ",", kj);
        free(kj);
        int rc = lit ? lit_add(c, lit) : -1;
        free(lit);
        if (rc < 0 || value_add(c, v, depth + 1)) return -1;
        first = 0;
    }
    return lit_add(c, "}") < 0 ? -1 : 0;
}

static int array_add(tg_comp *c, json_t *sch, int depth) {
    tg_prog *g = c->g;
    int64_t mn = 1, mx = 8;
    json_t *v;
    if ((v = json_object_get(sch, "minItems")) && json_is_integer(v)) mn = json_integer_value(v);
    if ((v = json_object_get(sch, "maxItems")) && json_is_integer(v)) mx = json_integer_value(v);
    if (mn < 1) mn = 1;   /* design: at least one item (a call's arrays are never empty) */
    if (mx > 8) mx = 8;
    if (mn > mx || g->n_arrays >= TG_ARRAYS) {
        snprintf(c->msg, c->ml, "\"tools\": tool %s: unsupported array (items %lld..%lld, or "
                 "more than %d arrays)", c->tool, (long long)mn, (long long)mx, TG_ARRAYS);
        return -1;
    }
    int8_t arr = (int8_t)g->n_arrays++;
    if (node_add(c, (tg_node){.op = OP_ARR, .arr = arr, .next = (uint16_t)(g->n + 1)}) < 0) return -1;
    if (lit_add(c, "[") < 0) return -1;
    int item = g->n;
    if (value_add(c, json_object_get(sch, "items"), depth + 1)) return -1;
    static const char *const sep[2] = {",", "]"};
    int ch = choice_add(c, sep, 2);
    if (ch < 0) return -1;
    g->nodes[ch].arr = arr;
    g->nodes[ch].min = (uint8_t)mn;
    g->nodes[ch].max = (uint8_t)mx;
    g->nodes[ch].target[0] = (uint16_t)item;
    return 0;
}

/* Appends the nodes of one value; the value continues at the node added after it. */
static int value_add(tg_comp *c, json_t *sch, int depth) {
    if (!json_is_object(sch) || depth > TG_DEPTH) {
        snprintf(c->msg, c->ml, "\"tools\": tool %s: %s", c->tool,
                 depth > TG_DEPTH ? "schema nested too deep" : "a schema must be an object");
        return -1;
    }
    if (json_object_get(sch, "$ref") || json_object_get(sch, "anyOf") ||
        json_object_get(sch, "oneOf") || json_object_get(sch, "allOf")) {
        snprintf(c->msg, c->ml, "\"tools\": tool %s: $ref, anyOf, oneOf and allOf are not supported", c->tool);
        return -1;
    }
    json_t *en = json_object_get(sch, "enum");
    if (en) {
        if (!json_is_array(en)) { snprintf(c->msg, c->ml, "\"tools\": tool %s: \"enum\" must be an array", c->tool); return -1; }
        return enum_add(c, en);
    }
    const char *t = schema_type(sch);
    if (!t) { snprintf(c->msg, c->ml, "\"tools\": tool %s: every value needs a \"type\"", c->tool); return -1; }
    tg_prog *g = c->g;
    if (!strcmp(t, "object")) return object_add(c, sch, depth);
    if (!strcmp(t, "array")) return array_add(c, sch, depth);
    if (!strcmp(t, "boolean")) { static const char *const b[2] = {"true", "false"}; return choice_add(c, b, 2) < 0 ? -1 : 0; }
    if (!strcmp(t, "null")) return lit_add(c, "null") < 0 ? -1 : 0;
    if (!strcmp(t, "integer") || !strcmp(t, "number"))
        return node_add(c, (tg_node){.op = OP_NUM, .arr = -1, .integer = !strcmp(t, "integer"),
                                     .next = (uint16_t)(g->n + 1)}) < 0 ? -1 : 0;
    if (!strcmp(t, "string")) {
        int64_t mx = TG_STR_MAX;
        json_t *m = json_object_get(sch, "maxLength");
        if (json_is_integer(m) && json_integer_value(m) >= 1 && json_integer_value(m) < mx) mx = json_integer_value(m);
        if (lit_add(c, "\"") < 0) return -1;
        return node_add(c, (tg_node){.op = OP_STR, .arr = -1, .str_max = (uint16_t)mx,
                                     .next = (uint16_t)(g->n + 1)}) < 0 ? -1 : 0;
    }
    snprintf(c->msg, c->ml, "\"tools\": tool %s: unsupported type \"%.40s\"", c->tool, t);
    return -1;
}

/* One call: {"name":"N","arguments":ARGS} continuing at `after` (patched by the caller). */
static int call_add(tg_comp *c, const tools_set *ts, json_t *const *schemas, uint16_t *ends) {
    tg_prog *g = c->g;
    if (lit_add(c, "{\"name\":") < 0) return -1;
    const char *names[TOOLS_MAX] = {0};
    char *q[TOOLS_MAX] = {0};
    int32_t n = 0;
    for (int32_t i = 0; i < ts->n; i++) {
        if (ts->choice == TOOLS_NAMED && i != ts->named) continue;
        json_t *s = json_string(ts->name[i]);
        q[n] = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        json_decref(s);
        names[n] = q[n] ? q[n] : "\"\"";
        n++;
    }
    int ch = choice_add(c, names, n);
    for (int32_t i = 0; i < n; i++) free(q[i]);
    if (ch < 0) return -1;
    g->nodes[ch].once = 1;
    int32_t k = 0;
    for (int32_t i = 0; i < ts->n; i++) {
        if (ts->choice == TOOLS_NAMED && i != ts->named) continue;
        g->nodes[ch].target[k++] = (uint16_t)g->n;
        c->tool = ts->name[i];
        if (lit_add(c, ",\"arguments\":") < 0 || object_add(c, schemas[i], 1) || lit_add(c, "}") < 0) return -1;
        ends[i] = (uint16_t)(g->n - 1);   /* the closing "}": its target is patched */
    }
    return 0;
}

/* {"tool_calls":[CALL(,CALL){0,4}]} — or, under auto, {"answer":true} to decline. */
static int prog_build(tools_set *ts, json_t *const *schemas, char *msg, size_t ml) {
    tg_comp c = {.g = &ts->prog, .msg = msg, .ml = ml, .tool = ""};
    tg_prog *g = c.g;
    static const char *const start[2] = {"{\"tool_calls\":[", "{\"answer\":true}"};
    int st = choice_add(&c, start, ts->choice == TOOLS_AUTO ? 2 : 1);
    if (st < 0) return -1;
    int8_t arr = (int8_t)g->n_arrays++;
    g->nodes[st].target[0] = (uint16_t)g->n;
    if (node_add(&c, (tg_node){.op = OP_ARR, .arr = arr, .next = (uint16_t)(g->n + 1)}) < 0) return -1;
    int call = g->n;
    uint16_t ends[TOOLS_MAX];
    if (call_add(&c, ts, schemas, ends)) return -1;
    static const char *const sep[2] = {",", "]}"};
    int ch = choice_add(&c, sep, 2);
    if (ch < 0) return -1;
    for (int32_t i = 0; i < ts->n; i++)
        if (ts->choice != TOOLS_NAMED || i == ts->named) g->nodes[ends[i]].target[0] = (uint16_t)ch;
    g->nodes[ch].arr = arr;
    g->nodes[ch].min = 1;
    int32_t n_names = ts->choice == TOOLS_NAMED ? 1 : ts->n;   /* each tool once per turn */
    g->nodes[ch].max = (uint8_t)(n_names < TOOLS_MAX_CALLS ? n_names : TOOLS_MAX_CALLS);
    g->nodes[ch].target[0] = (uint16_t)call;
    int end = node_add(&c, (tg_node){.op = OP_END});
    if (end < 0) return -1;
    g->nodes[ch].target[1] = (uint16_t)end;
    if (ts->choice == TOOLS_AUTO) g->nodes[st].target[1] = (uint16_t)end;
    return 0;
}

/* ---- the tool list ------------------------------------------------------------------------ */
static void prog_free(tg_prog *g) {
    for (int32_t i = 0; i < g->n; i++) {
        for (int32_t k = 0; k < g->nodes[i].n_alt; k++) free(g->nodes[i].alt[k]);
        free(g->nodes[i].alt);
        free(g->nodes[i].target);
    }
    free(g->nodes);
}

void tools_free(tools_set *ts) {
    if (!ts) return;
    for (int32_t i = 0; i < ts->n; i++) {
        free(ts->name[i]);
        free(ts->desc[i]);
        free(ts->params[i]);
    }
    prog_free(&ts->prog);
    free(ts);
}

int tools_choice_of(const tools_set *ts) { return ts ? ts->choice : TOOLS_NONE; }
const char *tools_name(const tools_set *ts, int32_t i) { return ts && i >= 0 && i < ts->n ? ts->name[i] : NULL; }

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* "tool_choice": none | auto | required | {"type":"function","function":{"name":N}}. */
static int choice_parse(tools_set *ts, json_t *choice, char *msg, size_t ml) {
    ts->choice = TOOLS_AUTO;
    if (!choice || json_is_null(choice)) return 0;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        if (!strcmp(c, "none")) ts->choice = TOOLS_NONE;
        else if (!strcmp(c, "required")) ts->choice = TOOLS_REQUIRED;
        else if (strcmp(c, "auto")) goto bad;
        return 0;
    }
    json_t *f = json_object_get(choice, "function");
    json_t *nm = json_object_get(f, "name");
    if (!json_is_string(json_object_get(choice, "type")) || strcmp(json_string_value(json_object_get(choice, "type")), "function") || !json_is_string(nm))
        goto bad;
    for (int32_t i = 0; i < ts->n; i++)
        if (!strcmp(ts->name[i], json_string_value(nm))) { ts->choice = TOOLS_NAMED; ts->named = i; return 0; }
    snprintf(msg, ml, "\"tool_choice\" names a function that is not in \"tools\"");
    return -1;
bad:
    snprintf(msg, ml, "\"tool_choice\" must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return -1;
}

/* One entry of "tools" into ts (index ts->n); its schema into *schema (borrowed). */
static int tool_parse(tools_set *ts, json_t *t, size_t i, json_t **schema, char *msg, size_t ml) {
    json_t *f = json_object_get(t, "function");
    json_t *ty = json_object_get(t, "type");
    json_t *nm = json_object_get(f, "name"), *d = json_object_get(f, "description");
    json_t *p = json_object_get(f, "parameters");
    if (!json_is_object(t) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") ||
        !json_is_object(f) || !json_is_string(nm) || !name_ok(json_string_value(nm)) ||
        (d && !json_is_null(d) && !json_is_string(d)) || (p && !json_is_null(p) && !json_is_object(p))) {
        snprintf(msg, ml, "\"tools\"[%zu] must be {\"type\": \"function\", \"function\": {\"name\": "
                 "1..64 of [A-Za-z0-9_-], \"description\"?: string, \"parameters\"?: JSON schema object}}", i);
        return -1;
    }
    for (int32_t k = 0; k < ts->n; k++)
        if (!strcmp(ts->name[k], json_string_value(nm))) {
            snprintf(msg, ml, "\"tools\"[%zu]: the name %s is used twice", i, ts->name[k]);
            return -1;
        }
    *schema = json_is_object(p) ? p : NULL;
    ts->name[ts->n] = strdup(json_string_value(nm));
    ts->desc[ts->n] = strdup(json_is_string(d) ? json_string_value(d) : "");
    ts->params[ts->n] = p && json_is_object(p) ? json_dumps(p, JSON_COMPACT) : strdup("{}");
    ts->n++;
    if (!ts->name[ts->n - 1] || !ts->desc[ts->n - 1] || !ts->params[ts->n - 1]) { snprintf(msg, ml, "out of memory"); return -1; }
    return 0;
}

int tools_parse(json_t *tools, json_t *choice, tools_set **out, char *msg, size_t ml) {
    *out = NULL;
    if (!tools || json_is_null(tools)) {
        if (choice && !json_is_null(choice) && !(json_is_string(choice) && (!strcmp(json_string_value(choice), "none") || !strcmp(json_string_value(choice), "auto")))) {
            snprintf(msg, ml, "\"tool_choice\" needs \"tools\"");
            return -1;
        }
        return 0;
    }
    if (!json_is_array(tools) || json_array_size(tools) < 1 || json_array_size(tools) > TOOLS_MAX) {
        snprintf(msg, ml, "\"tools\" must be an array of 1..%d functions", TOOLS_MAX);
        return -1;
    }
    tools_set *ts = calloc(1, sizeof *ts);
    json_t *schemas[TOOLS_MAX], *empty = json_object();
    if (!ts || !empty) { free(ts); json_decref(empty); snprintf(msg, ml, "out of memory"); return -1; }
    size_t i;
    json_t *t;
    int rc = 0;
    json_array_foreach(tools, i, t) {
        if ((rc = tool_parse(ts, t, i, &schemas[i], msg, ml))) break;
        if (!schemas[i]) schemas[i] = empty;
        const char *ty = schema_type(schemas[i]);
        if (schemas[i] != empty && (!ty || strcmp(ty, "object"))) {
            snprintf(msg, ml, "\"tools\"[%zu]: \"parameters\" must be a schema of type object", i);
            rc = -1;
            break;
        }
    }
    if (!rc) rc = choice_parse(ts, choice, msg, ml);
    if (!rc && ts->choice != TOOLS_NONE) rc = prog_build(ts, schemas, msg, ml);
    json_decref(empty);
    if (rc) { tools_free(ts); return -1; }
    if (ts->choice == TOOLS_NONE) { tools_free(ts); return 0; }   /* tools off: a plain answer */
    *out = ts;
    return 0;
}

/* ---- running the model -------------------------------------------------------------------- */
void tools_result_free(tools_result *r) {
    for (int32_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    memset(r, 0, sizeof *r);
}

static char *tools_system(const tools_set *ts, const answer_request *rq) {
    size_t cap = 1024 + (rq->system ? strlen(rq->system) : 0), len = 0;
    for (int32_t i = 0; i < ts->n; i++) cap += strlen(ts->name[i]) + strlen(ts->desc[i]) + strlen(ts->params[i]) + 32;
    char *s = malloc(cap);
    if (!s) return NULL;
    len += (size_t)snprintf(s, cap, "%s%sYou can call these tools:\n", rq->system ? rq->system : "", rq->system ? "\n" : "");
    for (int32_t i = 0; i < ts->n; i++)
        len += (size_t)snprintf(s + len, cap - len, "- %s: %s Arguments: %s\n", ts->name[i], ts->desc[i], ts->params[i]);
    snprintf(s + len, cap - len, "To call tools, write {\"tool_calls\":[{\"name\":...,\"arguments\":{...}}]} "
             "with one call for each thing the question asks%s.",
             ts->choice == TOOLS_AUTO ? "; if no tool helps, write {\"answer\":true}" : "");
    return s;
}

static char *tools_prompt(struct mmrag_engine *e, const tools_set *ts, const answer_request *rq) {
    char *sys = tools_system(ts, rq);
    size_t ul = strlen(rq->question) + (rq->history ? strlen(rq->history) : 0) + 64;
    char *user = malloc(ul), *p = NULL;
    if (sys && user) {
        snprintf(user, ul, "%s%s%s", rq->history ? "Conversation so far:\n" : "", rq->history ? rq->history : "", rq->question);
        int32_t need = mmrag_engine_chat_prompt(e, sys, user, NULL, 0);
        need = need < 0 ? -need : need;
        if ((p = malloc((size_t)need + 1))) mmrag_engine_chat_prompt(e, sys, user, p, (size_t)need + 1);
    }
    free(sys);
    free(user);
    return p;
}

/* The grammar's output back into calls (it is valid by construction; a cut one is not). */
static int calls_parse(const char *text, tools_result *out) {
    json_t *j = json_loads(text, 0, NULL);
    if (!j) return -1;
    if (json_object_get(j, "answer")) out->answered = 1;
    json_t *calls = json_object_get(j, "tool_calls");
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        if (out->n_calls >= TOOLS_MAX_CALLS) break;
        tools_call *tc = &out->calls[out->n_calls];
        tc->name = strdup(json_string_value(json_object_get(c, "name")));
        tc->arguments = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT);
        out->n_calls++;
        if (!tc->name || !tc->arguments) { json_decref(j); return -2; }
    }
    json_decref(j);
    return 0;
}

int tools_run(answer_llm *llm, const tools_set *ts, const answer_request *rq,
              tools_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    struct mmrag_engine *e = NULL;
    struct mmrag_session *ss = NULL;
    int rc = answer_llm_session(llm, rq, &e, &ss, err, errlen);
    if (rc != ANSWER_OK) return rc;
    struct mmrag_gen_result gr = {0};
    char *prompt = tools_prompt(e, ts, rq);
    if (!prompt) { rc = ANSWER_ERR_NOMEM; snprintf(err, errlen, "out of memory"); goto out; }
    struct mmrag_grammar g = {.data = &ts->prog, .state_size = sizeof(tg_state), .init = tg_init,
                              .feed = tg_feed, .done = tg_done};
    struct mmrag_gen_params p = mmrag_gen_default_params();
    p.max_tokens = rq->max_tokens;   /* a call cut short ends with finish_reason "length" */
    p.sampling.temperature = rq->temperature;
    p.sampling.top_p = rq->temperature > 0 ? rq->top_p : 1.0f;
    p.sampling.seed = rq->seed;
    p.loop_guard = 0;   /* the grammar bounds the output; a list of similar calls is fine */
    p.grammar = &g;
    int grc = mmrag_session_generate(ss, prompt, &p, &gr);
    if (grc < 0) { rc = answer_llm_gen_failed(ss, grc, err, errlen); goto out; }
    out->prompt_tokens = gr.n_prompt;
    out->completion_tokens = gr.n_gen;
    out->stop_reason = gr.stop_reason;
    if (calls_parse(gr.text, out) == -2) { rc = ANSWER_ERR_NOMEM; snprintf(err, errlen, "out of memory"); }
out:
    if (rc) tools_result_free(out);
    answer_llm_release(llm, ss);
    mmrag_gen_result_free(&gr);
    free(prompt);
    return rc;
}
