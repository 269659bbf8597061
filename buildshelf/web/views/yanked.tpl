% include('_head.tpl', title=title, feeds=feeds)
<h1>Build #{{yanked.number}} of {{project.name}} was yanked</h1>
<p class="lead">It is served no more, and its files are not downloaded from here: this link
is <strong>gone</strong> (410).</p>
<article class="build yanked" aria-labelledby="{{yanked.anchor}}-title">
% include('_yanked.tpl', y=yanked)
</article>
% if latest:
<h2>Take the latest build instead</h2>
<div class="actions">
  % include('_download.tpl', b=latest)
  <a class="ci" href="{{latest_page}}">Build #{{latest.number}} on the {{project.name}} page</a>
</div>
% else:
<p class="empty">{{project.name}} serves no build now.</p>
% end
<p><a href="{{yanked.link}}">All the builds of {{project.name}}, and those yanked</a></p>
% include('_foot.tpl')
