% include('_head.tpl', title=title, feeds=feeds)
<h1>{{project.name}}</h1>
<ul class="links">
  <li><a href="{{feed}}">Atom feed of this list</a></li>
  % if project.javadoc:
  <li><a href="{{project.javadoc}}">Javadoc</a></li>
  % end
  <li><a href="{{project.ci_job_url}}">CI job</a></li>
  <li><a href="{{project.json}}">JSON</a></li>
</ul>
% if chart:
% include('_chart.tpl', chart=chart)
% end
<form class="filters" method="get" action="{{project.page}}">
  <div class="field">
    <label for="channel">Channel</label>
    <select id="channel" name="channel">
      <option value="">All channels</option>
      % if channel and channel not in channels:
      <option value="{{channel}}" selected>{{channel}}</option>
      % end
      % for c in channels:
      <option value="{{c}}"{{" selected" if c == channel else ""}}>{{c}}</option>
      % end
    </select>
  </div>
  <div class="field check">
    <input type="checkbox" id="experimental" name="experimental" value="true"{{" checked" if experimental else ""}}>
    <label for="experimental">Include experimental builds</label>
  </div>
  <button type="submit">Show builds</button>
</form>
<h2 id="builds-heading">
% if not total:
No matching builds
% elif pages > 1:
Builds {{first}} to {{last}} of {{total}}, newest first
% else:
{{total}} build{{"" if total == 1 else "s"}}, newest first
% end
</h2>
% if latest:
<p class="permalink"><a class="latest" href="{{latest}}">Latest {{"" if experimental else "stable "}}build{{" in channel " + channel if channel else ""}}</a>:
a permanent link to the newest build of this list, to share.</p>
% end
% if not total:
<p class="empty">No {{"" if experimental else "stable "}}build{{" in channel " + channel if channel else ""}}.
% if not experimental:
Try including experimental builds.
% end
</p>
% end
<ol class="builds" aria-labelledby="builds-heading">
% for b in builds:
  <li>
    <article class="build" aria-labelledby="build-{{b.number}}">
      <div class="build-head">
        <h3 id="build-{{b.number}}">Build #{{b.number}}</h3>
        <span class="channel">{{b.channel}}</span>
        % if b.experimental:
        <span class="badge">Experimental</span>
        % end
        % if b.downloads:
        <span class="count">{{b.downloads}}</span>
        % end
        % include('_when.tpl', b=b)
      </div>
      % if b.commits:
      <ul class="commits">
        % for c in b.commits:
        <li><code title="{{c.hash}}">{{c.short}}</code> <span class="message">{{c.message}}</span></li>
        % end
      </ul>
      % else:
      <p class="empty">No commits listed.</p>
      % end
      % if b.sha256:
      <p class="integrity">{{b.size_text}}, SHA-256 <code class="sha256">{{b.sha256}}</code>
        % if b.checksum_url:
        <a href="{{b.checksum_url}}">.sha256</a>
        % end
      </p>
      % end
      % if b.extras:
      <ul class="extras" aria-label="Extra files of build #{{b.number}}">
        % for x in b.extras:
        <li><span class="key">{{x.key}}</span> <a href="{{x.url}}">{{x.file}}</a>
          % if x.sha256:
          <span class="integrity">{{x.size_text}}, SHA-256 <code class="sha256">{{x.sha256}}</code></span>
          % end
          % if x.checksum_url:
          <a href="{{x.checksum_url}}">.sha256</a>
          % end
        </li>
        % end
      </ul>
      % end
      <div class="actions">
        % include('_download.tpl', b=b)
        <a class="ci" href="{{b.url}}">CI run of build #{{b.number}}</a>
      </div>
    </article>
  </li>
% end
</ol>
% if pages > 1:
<nav class="pager" aria-label="Pages">
  % if newer:
  <a rel="prev" href="{{newer}}">Newer builds</a>
  % end
  <span>Page {{page}} of {{pages}}</span>
  % if older:
  <a rel="next" href="{{older}}">Older builds</a>
  % end
</nav>
% end
% if yanked:
<h2 id="yanked">Yanked builds</h2>
<p class="lead">Withdrawn, newest first: served no more, and their links say why.</p>
<ol class="builds" aria-labelledby="yanked">
% for y in yanked:
  <li>
    <article class="build yanked" id="{{y.anchor}}" aria-labelledby="{{y.anchor}}-title">
      % include('_yanked.tpl', y=y)
      <div class="actions">
        <a class="ci" href="{{y.url}}">CI run of build #{{y.number}}</a>
      </div>
    </article>
  </li>
% end
</ol>
% if yanked_unlisted:
<p class="empty">{{yanked_unlisted}} not listed.</p>
% end
% end
% include('_foot.tpl')
