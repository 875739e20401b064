/* slugify: a milpa tool in C, run as a WebAssembly component in milpa's sandbox.
 *
 *   {"text": "Hello, World!"}  ->  {"slug": "hello-world"}
 *
 * The tool implements the world milpa:tool@0.1.0 (crates/milpa-wasm/wit/tool.wit):
 *
 *   export call: func(args: string, ctx: call-context) -> result<string, tool-error>;
 *
 * Everything below the line "The tool" is the glue every C tool needs (copy it as is);
 * the tool itself is `slugify` and `tool_call`. Build: see README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Glue: the canonical ABI of the `call` export, by hand. ----
 *
 * The host writes each string argument into our memory with cabi_realloc and passes
 * (pointer, length) pairs: args, then the context's principal, channel and request id.
 * We answer through a 16-byte return area:
 *   offset 0: 0 = ok, 1 = err
 *   ok:  offset 4 pointer, 8 length of the result (JSON text)
 *   err: offset 4: 0 = invalid-args, 1 = failed; offset 8 pointer, 12 length of the message
 * Each call runs in a fresh instance, so nothing here needs freeing. */

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *old, size_t old_size, size_t align, size_t new_size) {
  (void)old_size;
  if (new_size == 0) return (void *)align;
  void *p = realloc(old, new_size);
  if (!p) abort();
  return p;
}

enum answer { ANSWER_OK, ANSWER_INVALID_ARGS, ANSWER_FAILED };

/* The tool: arguments as NUL-terminated JSON text; sets *out (malloc'd) to the JSON result
 * or to the message. */
static enum answer tool_call(const char *args, char **out);

static uint32_t return_area[4];

__attribute__((export_name("call")))
uint8_t *export_call(char *args, size_t args_len, char *principal, size_t principal_len,
                     char *channel, size_t channel_len, char *request_id, size_t request_id_len) {
  (void)principal; (void)principal_len; (void)channel; (void)channel_len;
  (void)request_id; (void)request_id_len;
  char *text = malloc(args_len + 1);
  if (!text) abort();
  memcpy(text, args, args_len);
  text[args_len] = '\0';
  char *out = NULL;
  enum answer answer = tool_call(text, &out);
  uint8_t *area = (uint8_t *)return_area;
  memset(return_area, 0, sizeof return_area);
  if (answer == ANSWER_OK) {
    return_area[1] = (uint32_t)(uintptr_t)out;
    return_area[2] = (uint32_t)strlen(out);
  } else {
    area[0] = 1;
    area[4] = answer == ANSWER_INVALID_ARGS ? 0 : 1;
    return_area[2] = (uint32_t)(uintptr_t)out;
    return_area[3] = (uint32_t)strlen(out);
  }
  return area;
}

/* ---- The tool. ---- */

/* The longest slug answered; longer text is cut. */
#define MAX_SLUG 200

/* Finds the string value of "text" in the arguments (milpa has validated them against the
 * tool's schema: an object with a string `text`) and decodes its escapes; characters
 * outside ASCII become spaces (they end a word). Returns 0 when there is none. */
static int text_argument(const char *args, char *out, size_t cap) {
  const char *at = strstr(args, "\"text\"");
  if (!at) return 0;
  at += 6;
  while (*at == ' ' || *at == ':' || *at == '\t' || *at == '\n' || *at == '\r') at++;
  if (*at != '"') return 0;
  at++;
  size_t n = 0;
  while (*at && *at != '"' && n + 1 < cap) {
    char c = *at++;
    if (c == '\\') {
      char e = *at++;
      switch (e) {
        case 'n': case 't': case 'r': case 'b': case 'f': c = ' '; break;
        case 'u': {
          unsigned code = 0;
          for (int i = 0; i < 4 && *at; i++) {
            char h = *at++;
            code = code * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          c = code < 0x80 ? (char)code : ' ';
          break;
        }
        case '\0': return 0;
        default: c = e; /* \" \\ \/ */
      }
    } else if ((unsigned char)c >= 0x80) {
      c = ' ';
    }
    out[n++] = c;
  }
  out[n] = '\0';
  return 1;
}

/* Lowercase letters and digits kept, every other run of characters one `-`, none at the
 * ends. */
static void slugify(const char *text, char *slug) {
  size_t n = 0;
  int dash = 0;
  for (const char *c = text; *c && n < MAX_SLUG; c++) {
    char ch = *c;
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
      if (dash && n > 0 && n + 1 < MAX_SLUG) slug[n++] = '-';
      dash = 0;
      slug[n++] = ch;
    } else {
      dash = 1;
    }
  }
  slug[n] = '\0';
}

static enum answer tool_call(const char *args, char **out) {
  static char text[4096];
  static char slug[MAX_SLUG + 1];
  if (!text_argument(args, text, sizeof text)) {
    *out = strdup("text: a string is required");
    return ANSWER_INVALID_ARGS;
  }
  slugify(text, slug);
  if (slug[0] == '\0') {
    *out = strdup("text: no letters or digits to make a slug of");
    return ANSWER_INVALID_ARGS;
  }
  size_t size = strlen(slug) + 12;
  *out = malloc(size);
  if (!*out) abort();
  snprintf(*out, size, "{\"slug\":\"%s\"}", slug);
  return ANSWER_OK;
}
