% include('_head.tpl', title=title, feeds=feeds, wide=True)
<h1>Downloads</h1>
<p class="lead">The latest build of every project served here. Open a project for its full
history, or follow its Atom feed.</p>
% if not projects:
<p class="empty">No projects are served yet.</p>
% end
<ul class="projects">
% for p in projects:
  <li>
    <article class="card" aria-labelledby="project-{{p.slug}}">
      <h2 id="project-{{p.slug}}"><a href="{{p.page}}">{{p.name}}</a></h2>
      % if p.total:
      <p class="total">{{p.total}}</p>
      % end
      % if p.stable:
      <h3>Latest stable build</h3>
      <p class="meta"><span class="number">#{{p.stable.number}}</span>
        <span class="channel">{{p.stable.channel}}</span>
        % include('_when.tpl', b=p.stable)
        % if p.stable.downloads:
        <span class="count">{{p.stable.downloads}}</span>
        % end
      </p>
      % include('_download.tpl', b=p.stable)
      % include('_integrity.tpl', b=p.stable)
      % elif not p.experimental:
      <p class="empty">No builds yet.</p>
      % else:
      <p class="empty">No stable build yet.</p>
      % end
      % if p.experimental:
      <h3>Newer experimental build</h3>
      <p class="meta"><span class="number">#{{p.experimental.number}}</span>
        <span class="channel">{{p.experimental.channel}}</span>
        <span class="badge">Experimental</span>
        % include('_when.tpl', b=p.experimental)
        % if p.experimental.downloads:
        <span class="count">{{p.experimental.downloads}}</span>
        % end
      </p>
      % include('_download.tpl', b=p.experimental)
      % include('_integrity.tpl', b=p.experimental)
      % end
      <ul class="links">
        <li><a href="{{p.all_builds}}">{{p.all_builds_text}}</a></li>
        <li><a href="{{p.feed}}">Atom feed</a></li>
        % if p.javadoc:
        <li><a href="{{p.javadoc}}">Javadoc</a></li>
        % end
        <li><a href="{{p.json}}">JSON</a></li>
        <li><a href="/api-document">API document</a></li>
      </ul>
    </article>
  </li>
% end
</ul>
% include('_foot.tpl')
