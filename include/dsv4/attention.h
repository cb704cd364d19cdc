/* The attention operator family: contracts land with the family's issue. */
#ifndef DSV4_ATTENTION_H
#define DSV4_ATTENTION_H

#include "dsv4/dsv4.h"

#endif
