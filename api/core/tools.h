/* api/core/tools — function calling for chat clients (OpenAI "tools"): the tool list and
 * tool_choice are checked and each tool's JSON schema is compiled into a byte grammar the
 * engine decodes under (engine.h mmrag_grammar), so the model can only write calls whose
 * names exist and whose arguments match their schema.
 *
 *   tools_set *ts; if (tools_parse(tools_json, tool_choice_json, &ts, msg, n)) -> 400
 *   tools_result tr; tools_run(llm, ts, &rq, &tr, err, n);   (rq: question, system, history,
 *   ...; tr.n_calls == 0 and tr.answered: the model chose to answer: run answer_run)
 *   tools_result_free(&tr); tools_free(ts);
 *
 * What the model writes: {"tool_calls":[{"name":N,"arguments":{...}}, ...]} with 1..5
 * calls, each tool at most once per turn, (or, under "auto", {"answer":true} to decline, after which the caller answers with the
 * usual grounded RAG answer). Arguments list every property of the schema in its order.
 * Schema subset: type object (properties), string (enum, maxLength <= 256), integer,
 * number (no exponent), boolean, null, array (items, minItems >= 1, maxItems <= 8), enum;
 * a type list takes its first non-null type. $ref, anyOf/oneOf/allOf and untyped values
 * are refused (400), as are more than 32 tools or nesting deeper than 6. */
#ifndef MMRAG_API_CORE_TOOLS_H
#define MMRAG_API_CORE_TOOLS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api/core/answer.h"

#define TOOLS_MAX 32
#define TOOLS_MAX_CALLS 5

typedef enum { TOOLS_NONE = 0, TOOLS_AUTO = 1, TOOLS_REQUIRED = 2, TOOLS_NAMED = 3 } tools_choice;

typedef struct tools_set tools_set;
/* tools: the request's "tools" array; choice: "tool_choice" (NULL = auto). Returns 0 with
 * *out (NULL when tools is absent or empty), or -1 with a message naming the field. */
int tools_parse(json_t *tools, json_t *choice, tools_set **out, char *msg, size_t ml);
void tools_free(tools_set *ts);
int tools_choice_of(const tools_set *ts);
/* The name of tool i (NULL past the end): for the prompt of the answer after tool results. */
const char *tools_name(const tools_set *ts, int32_t i);

typedef struct {
    char *name;
    char *arguments;           /* JSON object text, valid under the tool's schema */
} tools_call;
typedef struct {
    tools_call calls[TOOLS_MAX_CALLS];
    int32_t n_calls;
    int32_t answered;          /* auto: the model chose to answer instead */
    int32_t prompt_tokens, completion_tokens;
    int32_t stop_reason;       /* enum mmrag_stop_reason */
} tools_result;
void tools_result_free(tools_result *r);

/* Asks the model for tool calls for rq->question (with rq->system and rq->history, within
 * rq->max_tokens: a cut call leaves n_calls 0 and answered 0). Returns an answer_status. */
int tools_run(answer_llm *llm, const tools_set *ts, const answer_request *rq,
              tools_result *out, char *err, size_t errlen);
#endif
