/* The indices operator family: contracts land with the family's issue. */
#ifndef DSV4_INDICES_H
#define DSV4_INDICES_H

#include "dsv4/dsv4.h"

#endif
