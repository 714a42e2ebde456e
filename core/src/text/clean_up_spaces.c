/* clf_text_clean_up_spaces (clformer/tokenizer.h): transformers' clean_up_tokenization. */
#include <string.h>

#include "clformer/tokenizer.h"

/* PreTrainedTokenizerBase.clean_up_tokenization of transformers 4.40, in its order */
static const struct {
    const char *from, *to;
} replacements[] = {
    {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

void clf_text_clean_up_spaces(char *text)
{
    if (!text)
        return;
    for (size_t r = 0; r < sizeof replacements / sizeof replacements[0]; r++) {
        const char *from = replacements[r].from, *to = replacements[r].to;
        const size_t n_from = strlen(from), n_to = strlen(to);
        /* every `to` is shorter than its `from`: the writer never passes the reader */
        char *w = text;
        for (const char *p = text; *p;) {
            if (strncmp(p, from, n_from) == 0) {
                memcpy(w, to, n_to);
                w += n_to;
                p += n_from;
            } else {
                *w++ = *p++;
            }
        }
        *w = '\0';
    }
}
