// the pit page: written on the page's own branch
