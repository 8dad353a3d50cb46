/* Seed 003's regression data as PyTorch made it (tour_nw_data.c, generated). */
#ifndef ATTN_CLI_TOUR_NW_H
#define ATTN_CLI_TOUR_NW_H

enum {
    TOUR_NW_TRAIN = 150,
    TOUR_NW_TEST = 50
};

extern const float tour_nw_x_train[TOUR_NW_TRAIN]; /* sorted */
extern const float tour_nw_y_train[TOUR_NW_TRAIN];
extern const float tour_nw_x_test[TOUR_NW_TEST]; /* 0, 0.1, ..., 4.9 */
extern const float tour_nw_y_true[TOUR_NW_TEST]; /* f(x_test) */

#endif
