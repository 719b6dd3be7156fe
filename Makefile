# Build and install Flex: `make install PREFIX=/usr/local DESTDIR=`.
#
#   make                 release build of every binary (cargo build --release --locked)
#   make install         build, then install binaries (flexd in sbin), man pages, shell
#                        completions, the systemd unit, /etc/flex/flexd.toml (site paths; an
#                        existing one is kept) and the example crontab
#   make install-files   install what is already built (PROFILE and CARGO_TARGET_DIR pick it)
#   make uninstall       remove what install put there, except /etc/flex/flexd.toml and the
#                        state in /var/lib/flex
#   make install-slurm-names
#                        flex-slurm, and Slurm's command names (sbatch, squeue, scancel, sacct,
#                        scontrol, sinfo, srun, sacctmgr, sshare) as links to it in
#                        SLURMNAMESDIR, a directory of their own for users to put first on
#                        PATH; a name there that is not
#                        such a link (a real Slurm's command) is never replaced: make fails
#   make uninstall-slurm-names   remove those links and flex-slurm
#
# The man pages (man/) and completions (etc/completions/) are checked in; they are generated
# from the commands' clap definitions by `FLEX_BLESS=1 cargo test -p flex-tests --test docs`.

PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/flex
UNITDIR ?= $(PREFIX)/lib/systemd/system
BASHDIR ?= $(DATADIR)/bash-completion/completions
ZSHDIR ?= $(DATADIR)/zsh/site-functions
FISHDIR ?= $(DATADIR)/fish/vendor_completions.d
SLURMNAMESDIR ?= $(PREFIX)/lib/flex/slurm-bin

CARGO ?= cargo
PROFILE ?= release
CARGO_TARGET_DIR ?= target
OUT := $(CARGO_TARGET_DIR)/$(if $(filter dev test,$(PROFILE)),debug,$(PROFILE))

COMMANDS := flexsub flexq flexcancel flexcontrol flexrun flexacct flexreport flexprio flexshare flexsim flexgres
INSTALL ?= install

SLURMNAMES := sbatch squeue scancel sacct scontrol sinfo srun sacctmgr sshare

.PHONY: all build install install-files uninstall install-slurm-names uninstall-slurm-names

all: build

build:
	$(CARGO) build --profile $(PROFILE) --locked --bins

install: build
	$(MAKE) install-files

install-files:
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(BASHDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR) $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(SYSCONFDIR)/flex
	for c in $(COMMANDS); do \
		$(INSTALL) -m 0755 $(OUT)/$$c $(DESTDIR)$(BINDIR)/$$c || exit 1; \
	done
	$(INSTALL) -m 0755 $(OUT)/flexd $(DESTDIR)$(SBINDIR)/flexd
	$(INSTALL) -m 0644 man/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 0644 man/man5/*.5 $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 0644 man/man8/*.8 $(DESTDIR)$(MANDIR)/man8/
	for c in $(COMMANDS) flexd; do \
		$(INSTALL) -m 0644 etc/completions/bash/$$c $(DESTDIR)$(BASHDIR)/$$c && \
		$(INSTALL) -m 0644 etc/completions/zsh/_$$c $(DESTDIR)$(ZSHDIR)/_$$c && \
		$(INSTALL) -m 0644 etc/completions/fish/$$c.fish $(DESTDIR)$(FISHDIR)/$$c.fish || exit 1; \
	done
	sed 's|@SBINDIR@|$(SBINDIR)|g' etc/flexd.service > $(DESTDIR)$(UNITDIR)/flexd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/flexd.service
	sed 's|@BINDIR@|$(BINDIR)|g' etc/flex.crontab > $(DESTDIR)$(DOCDIR)/flex.crontab
	chmod 0644 $(DESTDIR)$(DOCDIR)/flex.crontab
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml ]; then \
		echo "keeping the existing $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml"; \
	else \
		sed -e 's|^socket = .*|socket = "/run/flex/flexd.sock"|' \
		    -e 's|^state_dir = .*|state_dir = "/var/lib/flex"|' \
		    -e '1s|^|# Installed by `make install`: the compiled-in defaults with site paths.\n|' \
		    etc/flexd.toml > $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml && \
		echo "installed $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml"; \
	fi

uninstall:
	for c in $(COMMANDS); do rm -f $(DESTDIR)$(BINDIR)/$$c; done
	rm -f $(DESTDIR)$(SBINDIR)/flexd
	for c in $(COMMANDS); do rm -f $(DESTDIR)$(MANDIR)/man1/$$c.1; done
	rm -f $(DESTDIR)$(MANDIR)/man5/flexd.toml.5 $(DESTDIR)$(MANDIR)/man8/flexd.8
	for c in $(COMMANDS) flexd; do \
		rm -f $(DESTDIR)$(BASHDIR)/$$c $(DESTDIR)$(ZSHDIR)/_$$c $(DESTDIR)$(FISHDIR)/$$c.fish; \
	done
	rm -f $(DESTDIR)$(UNITDIR)/flexd.service $(DESTDIR)$(DOCDIR)/flex.crontab
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/flex/flexd.toml and the state in /var/lib/flex"

install-slurm-names:
	$(INSTALL) -d $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 0755 $(OUT)/flex-slurm $(DESTDIR)$(BINDIR)/flex-slurm
	$(DESTDIR)$(BINDIR)/flex-slurm links $(DESTDIR)$(SLURMNAMESDIR) $(BINDIR)/flex-slurm

uninstall-slurm-names:
	for c in $(SLURMNAMES); do \
		l=$(DESTDIR)$(SLURMNAMESDIR)/$$c; \
		if [ -L $$l ] && [ "$$(basename "$$(readlink $$l)")" = flex-slurm ]; then rm -f $$l; fi; \
	done
	-rmdir $(DESTDIR)$(SLURMNAMESDIR) 2>/dev/null
	rm -f $(DESTDIR)$(BINDIR)/flex-slurm
