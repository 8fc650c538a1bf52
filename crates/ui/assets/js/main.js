  // which page to draw, once the viewer is known; the end of the page script (see common.js)
  const pages = { list: listPage, request: requestPage, start: startPage, runners: runnersPage, schedules: schedulesPage, "sign-in": signInPage };
  whoAmI().then((found) => {
    me = found;
    showWho();
    if (me.auth && !me.signedIn && page !== "sign-in") {
      toSignIn();
      return;
    }
    if (pages[page]) pages[page]();
  });
})();
